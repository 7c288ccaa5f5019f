//! `{{name}}`: a tag filter. A request tagged `<key>=<value>` reaches only the candidates
//! whose endpoint carries the same tag; a request without the tag, or one that no
//! candidate matches, keeps every candidate (the filter narrows, it never empties).
//!
//! Config: `key` (text, default `"lane"`): the tag that routes.

use axle_sdk::{Config, EndpointId, EndpointTable, RouteReads, RouteRequest, Router, TagReads};

/// The router.
pub struct TagFilter {
    key: String,
}

impl Router for TagFilter {
    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&["key"])?;
        let key = config.text_or("key", "lane")?;
        if key.is_empty() {
            return Err("key `key`: must not be empty".to_string());
        }
        Ok(TagFilter { key })
    }

    /// Only its tag: the kernel fills nothing else and asks once per value of it.
    fn declare(&self) -> RouteReads {
        RouteReads {
            tags: TagReads::Keys(vec![self.key.clone()]),
            ..RouteReads::default()
        }
    }

    fn route(
        &mut self,
        table: &EndpointTable,
        candidates: &[EndpointId],
        request: &RouteRequest,
    ) -> Vec<EndpointId> {
        let Some(wanted) = request.tag(&self.key) else {
            return candidates.to_vec();
        };
        let matching: Vec<EndpointId> = candidates
            .iter()
            .copied()
            .filter(|id| table.get(*id).and_then(|e| e.tag(&self.key)) == Some(wanted))
            .collect();
        if matching.is_empty() {
            candidates.to_vec()
        } else {
            matching
        }
    }
}

axle_sdk::export_router!(TagFilter);
