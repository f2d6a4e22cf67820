//! Every flag can be set by an environment variable: `--rate-window 5s` is also
//! `WEIR_RATE_WINDOW=5s`. A flag without an `env` of its own gets `WEIR_` and its long name
//! in capitals (dashes as underscores); `--help` shows the variable only when it is set,
//! so that the help stays short and still tells why a flag has a value nobody typed.

use clap::{Arg, Command, CommandFactory};

/// The command line of `C`, with the variables added and hidden where unset.
pub(crate) fn command<C: CommandFactory>() -> Command {
    with_env(C::command())
}

fn with_env(cmd: Command) -> Command {
    cmd.mut_args(arg_env).mut_subcommands(with_env)
}

fn arg_env(arg: Arg) -> Arg {
    let arg = match (arg.get_env().is_some(), arg.get_long()) {
        (false, Some(long)) if !matches!(long, "help" | "version") => {
            let name = format!("WEIR_{}", long.to_ascii_uppercase().replace('-', "_"));
            arg.env(name)
        }
        _ => arg,
    };
    let set = arg.get_env().is_some_and(|v| std::env::var_os(v).is_some());
    arg.hide_env(!set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_gets_a_variable() {
        let cmd = command::<crate::Cli>();
        let dlq = cmd.find_subcommand("dlq").unwrap();
        let purge = dlq.find_subcommand("purge").unwrap();
        let env = |c: &Command, id: &str| {
            c.get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_env())
                .map(|v| v.to_string_lossy().into_owned())
        };
        assert_eq!(env(purge, "older_than").as_deref(), Some("WEIR_OLDER_THAN"));
        assert_eq!(env(purge, "yes").as_deref(), Some("WEIR_YES"));
        assert_eq!(env(dlq, "redis_url").as_deref(), Some("REDIS_URL"));
        let work = cmd.find_subcommand("work").unwrap();
        assert_eq!(
            env(work, "visibility_timeout").as_deref(),
            Some("WEIR_VISIBILITY_TIMEOUT")
        );
        for sub in cmd.get_subcommands() {
            for a in sub.get_arguments().filter(|a| a.get_long().is_some()) {
                assert!(a.get_env().is_some(), "{} --{:?}", sub.get_name(), a.get_long());
            }
        }
    }
}
