//! `weir functions load [--replace]` and `weir functions status`: the `weir` Redis
//! Functions library that producers in other languages call (docs/protocol.md).

use crate::Common;
use clap::{Args, Subcommand};
use std::process::ExitCode;
use weir::queue::functions::{self, LibraryInfo, Loaded};

#[derive(Args, Debug)]
pub(crate) struct FunctionsArgs {
    #[command(subcommand)]
    action: Action,
    #[command(flatten)]
    common: Common,
}

#[derive(Subcommand, Debug)]
enum Action {
    /// Load this weir's library into Redis (consumers also load it at start when it is
    /// missing). A library of another weir build is left alone unless --replace.
    Load {
        /// Replace whatever library named weir is loaded (an upgrade or a downgrade: every
        /// producer then calls this weir's functions).
        #[arg(long)]
        replace: bool,
    },
    /// Show the library loaded in Redis and this weir's.
    Status,
}

pub(crate) async fn run(a: FunctionsArgs) -> crate::error::Result<ExitCode> {
    // The library serves every queue: --queue is not used.
    let mut conn = a.common.redis()?.connect().await?;
    match a.action {
        Action::Load { replace } => match functions::load(&mut conn, replace).await? {
            Loaded::Loaded => println!("loaded the weir library: {}", LibraryInfo::ours()),
            Loaded::Current => println!("the weir library is loaded already: {}", LibraryInfo::ours()),
            Loaded::Replaced(old) => {
                let old = old.map_or("a library not from weir".to_owned(), |i| i.to_string());
                println!("replaced {old} with {}", LibraryInfo::ours());
            }
        },
        Action::Status => {
            let ours = functions::code_hash();
            let hash = functions::loaded_code_hash(&mut conn).await?;
            match (functions::loaded(&mut conn).await?, &hash) {
                (Some(info), Some(h)) => println!("loaded: {info}, code sha1 {h}"),
                (Some(info), None) => println!("loaded: {info}"),
                (None, _) => println!("loaded: none (`weir functions load` loads it)"),
            }
            println!("this weir: {}, code sha1 {ours}", LibraryInfo::ours());
            // The library's claim of its own build proves nothing: its code must match.
            if let Some(h) = hash.filter(|h| h != ours) {
                return Err(functions::code_mismatch(&h).into());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
