//! The hash of the library's code: what a consumer and `weir functions status` compare
//! with the library Redis holds, instead of trusting what `weir_version` says.

use super::{LIBRARY, code, named_weir};
use crate::error::{Error, LibraryError, Result};
use redis::aio::ConnectionLike;
use std::sync::LazyLock;

static CODE_HASH: LazyLock<String> = LazyLock::new(|| code_hash_of(code()));

/// The SHA-1 of this weir's library code ([`code`]), in hex: what a consumer expects the
/// loaded library's code to hash to (see [`loaded_code_hash`]). Unlike what `weir_version`
/// says, it cannot be claimed by a library that is not this code.
pub fn code_hash() -> &'static str {
    &CODE_HASH
}

/// The SHA-1 of a library's code, in hex.
pub fn code_hash_of(code: &str) -> String {
    redis::Script::new(code).get_hash().to_owned()
}

/// The SHA-1 of the code of the library named `weir` that Redis holds (`FUNCTION LIST
/// WITHCODE LIBRARYNAME weir`), or `None` when there is none.
pub async fn loaded_code_hash<C: ConnectionLike>(conn: &mut C) -> Result<Option<String>> {
    let libs: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("WITHCODE")
        .arg("LIBRARYNAME")
        .arg(LIBRARY)
        .query_async(conn)
        .await?;
    Ok(libs.iter().filter(|e| named_weir(e)).find_map(|e| {
        let redis::Value::Array(fields) = e else {
            return None;
        };
        fields.chunks(2).find_map(|kv| match kv {
            [redis::Value::BulkString(k), redis::Value::BulkString(v)] if k.as_slice() == b"library_code" => {
                Some(code_hash_of(&String::from_utf8_lossy(v)))
            }
            _ => None,
        })
    }))
}

/// The refusal of a loaded library whose code is not this weir's: names both hashes and
/// how an admin reloads it.
pub fn code_mismatch(loaded: &str) -> Error {
    LibraryError::CodeMismatch {
        loaded_sha1: loaded.to_owned(),
        ours_sha1: code_hash().to_owned(),
    }
    .into()
}
