//! `msgpack`: `application/msgpack`. Every value of the model maps one to one (binary and
//! non-text map keys included); extension types are refused on decode. Values cross
//! packed and are streamed both ways (`convert.rs`), MessagePack written by hand
//! (`write.rs`) and read with `rmp`'s markers.

mod convert;
mod write;

use axle_sdk::{Config, Serializer, Value};

/// The MessagePack serializer.
pub struct MsgpackSerializer;

impl Serializer for MsgpackSerializer {
    fn new(config: &Config) -> Result<Self, String> {
        config.reject_unknown(&[])?;
        Ok(MsgpackSerializer)
    }

    fn content_type(&self) -> String {
        "application/msgpack".to_string()
    }

    fn encode(&mut self, value: &Value) -> Result<Vec<u8>, String> {
        convert::encode_packed(&value.pack()?)
    }

    fn decode(&mut self, bytes: &[u8]) -> Result<Value, String> {
        Value::unpack(&convert::decode_packed(bytes)?)
    }

    fn encode_packed(&mut self, value: &[u8]) -> Result<Vec<u8>, String> {
        convert::encode_packed(value)
    }

    fn decode_packed(&mut self, bytes: &[u8]) -> Result<Vec<u8>, String> {
        convert::decode_packed(bytes)
    }
}

axle_sdk::export_serializer!(MsgpackSerializer);

#[cfg(test)]
mod tests {
    use super::*;
    use axle_sdk::{Tree, MAX_DEPTH};

    #[test]
    fn round_trips_nested_values() {
        let mut s = MsgpackSerializer::new(&Config::default()).unwrap();
        let tree = Tree::Mapping(vec![
            (
                Tree::Text("a".into()),
                Tree::Array(vec![Tree::Signed(-1), Tree::Float(2.5), Tree::Null]),
            ),
            (Tree::Signed(7), Tree::Binary(vec![0, 255])),
            (Tree::Text("u".into()), Tree::Unsigned(u64::MAX)),
            (
                Tree::Text("m".into()),
                Tree::Mapping(vec![(Tree::Boolean(true), Tree::Text("yes".into()))]),
            ),
        ]);
        let value = Value::from_tree(&tree);
        let bytes = s.encode(&value).unwrap();
        assert_eq!(s.decode(&bytes).unwrap().to_tree().unwrap(), tree);
    }

    #[test]
    fn rejects_garbage() {
        let mut s = MsgpackSerializer::new(&Config::default()).unwrap();
        assert!(
            s.decode(&[0xa5, b'a']).is_err(),
            "a 5-byte string cut after 1"
        );
        assert!(s.decode(&[]).is_err(), "empty input");
        assert!(s.decode(&[0x01, 0x02]).unwrap_err().contains("trailing"));
        assert!(
            s.decode(&[0xdd, 0xff, 0xff, 0xff, 0xff]).is_err(),
            "array longer than input"
        );
    }

    #[test]
    fn reads_every_width_writers_choose() {
        let mut s = MsgpackSerializer::new(&Config::default()).unwrap();
        let one = |s: &mut MsgpackSerializer, bytes: &[u8]| s.decode(bytes).unwrap().to_tree();
        assert_eq!(one(&mut s, &[0xcd, 0x01, 0x00]), Ok(Tree::Signed(256)));
        assert_eq!(one(&mut s, &[0xd0, 0x80]), Ok(Tree::Signed(-128)));
        assert_eq!(one(&mut s, &[0xff]), Ok(Tree::Signed(-1)));
        assert_eq!(
            one(&mut s, &[0xca, 0x3f, 0xc0, 0, 0]),
            Ok(Tree::Float(1.5)),
            "a float32"
        );
        assert_eq!(
            one(&mut s, &[0xd9, 2, b'h', b'i']),
            Ok(Tree::Text("hi".into()))
        );
        assert_eq!(one(&mut s, &[0xc4, 1, 7]), Ok(Tree::Binary(vec![7])));
        assert_eq!(
            one(&mut s, &[0xde, 0, 1, 0xc0, 0xc3]),
            Ok(Tree::Mapping(vec![(Tree::Null, Tree::Boolean(true))]))
        );
        assert!(s
            .decode(&[0xd4, 5, 0])
            .unwrap_err()
            .contains("extension type 5"));
        assert!(s.decode(&[0xa1, 0xff]).unwrap_err().contains("UTF-8"));
        assert!(s.decode(&[0xc1]).unwrap_err().contains("reserved"));
        let mut deep = vec![0x91; MAX_DEPTH + 2];
        deep.push(0xc0);
        assert!(s.decode(&deep).unwrap_err().contains("nests deeper"));
    }

    #[test]
    fn writes_the_smallest_forms() {
        let mut s = MsgpackSerializer::new(&Config::default()).unwrap();
        let value = Value::from_tree(&Tree::Mapping(vec![(
            Tree::Text("a".into()),
            Tree::Array(vec![Tree::Signed(1), Tree::Signed(-1), Tree::Signed(300)]),
        )]));
        assert_eq!(
            s.encode(&value).unwrap(),
            [0x81, 0xa1, b'a', 0x93, 0x01, 0xff, 0xcd, 0x01, 0x2c]
        );
    }
}
