//! fetch.rs's unit tests: the reply's pairing, the state bits, deferred envelopes.

use super::*;

/// fetch.lua's `STATE` table and [`state`] name the same bits, and each bit once.
#[test]
fn the_state_bits_agree_with_fetch_lua() {
    let lua = include_str!("../fetch.lua");
    let start = lua.find("local STATE = {").expect("fetch.lua has a STATE table") + "local STATE = {".len();
    let table = &lua[start..start + lua[start..].find('}').expect("the table ends")];
    let mut in_lua: Vec<(String, u64)> = table
        .split(',')
        .filter(|f| !f.trim().is_empty())
        .map(|f| {
            let (name, value) = f.split_once('=').expect("name = value");
            (name.trim().to_string(), value.trim().parse().expect("a number"))
        })
        .collect();
    let mut in_rust: Vec<(String, u64)> = state::NAMED.iter().map(|(n, v)| (n.to_string(), *v)).collect();
    in_lua.sort();
    in_rust.sort();
    assert_eq!(in_lua, in_rust);
    let mut all = 0;
    for (name, bit) in state::NAMED {
        assert!(
            bit.is_power_of_two() && all & bit == 0,
            "{name} = {bit} is not a bit of its own"
        );
        all |= bit;
    }
    // No bare number is added to the state in the script: each bit goes by its name.
    for line in lua.lines().filter(|l| l.contains("bits + ")) {
        assert!(
            line.contains("bits + STATE."),
            "a bare state bit in fetch.lua: {line}"
        );
    }
}

fn ids_of(f: &Fetched) -> Vec<&str> {
    f.jobs.iter().map(|j| j.name.as_str()).collect()
}

#[test]
fn ids_pair_with_envelopes_in_order_suspect_first() {
    let mut f = Fetched::default();
    let envs = [b"{1}", b"{2}", b"{3}"].map(|e| Some(e.to_vec())).to_vec();
    pair(&mut f, b"s\nb\xff\nc", envs, 1).unwrap();
    assert_eq!(ids_of(&f), ["s", "c"]);
    assert_eq!(f.jobs[1].envelope(), b"{3}");
    assert_eq!(f.bad_ids, [b"b\xff".to_vec()]);
    assert_eq!(f.suspects, 1);
}

#[test]
fn an_empty_id_line_is_an_inline_job_named_by_its_envelope() {
    let mut f = Fetched::default();
    let env =
        br#"{"attempt":0,"max_attempts":3,"priority":1,"enqueued_at":5,"id":"g-1","kind":"k","payload":{}}"#;
    let envs = vec![
        Some(env.to_vec()),
        Some(b"{2}".to_vec()),
        Some(b"{\xff}".to_vec()),
    ];
    pair(&mut f, b"\nb\n", envs, 0).unwrap();
    assert_eq!(ids_of(&f), [std::str::from_utf8(env).unwrap(), "b"]);
    assert!(f.jobs[0].is_inline() && !f.jobs[1].is_inline());
    assert_eq!(
        (f.jobs[0].envelope(), f.jobs[1].envelope()),
        (&env[..], &b"{2}"[..])
    );
    assert_eq!(f.jobs[0].decode(usize::MAX).unwrap().id, "g-1");
    assert!(f.jobs[0].decode(10).is_err(), "over the size limit");
    // An inline envelope that is not UTF-8 cannot be named.
    assert_eq!(f.bad_ids, [b"{\xff}".to_vec()]);
}

#[test]
fn deferred_envelopes_are_filled_in_and_jobs_deleted_meanwhile_dropped() {
    let mut f = Fetched::default();
    // An empty envelope stored (by hand) is an envelope, not a deferred one: it is
    // dead-lettered as undecodable, as before.
    let envs = vec![None, Some(b"{2}".to_vec()), Some(Vec::new()), None, None];
    let deferred = pair(&mut f, b"s\nb\ne\nc\nd", envs, 1).unwrap();
    assert_eq!(deferred, [0, 3, 4]);
    fill_deferred(
        &mut f,
        &deferred,
        vec![None, Some(b"{3}".to_vec()), Some(Vec::new())],
    );
    assert_eq!(ids_of(&f), ["b", "e", "c", "d"]);
    let envs: Vec<&[u8]> = f.jobs.iter().map(|j| j.envelope()).collect();
    assert_eq!(envs, [&b"{2}"[..], b"", b"{3}", b""]);
    assert_eq!(f.suspects, 0, "the suspect was deleted");
}

#[test]
fn an_inline_job_without_its_envelope_is_refused() {
    let mut f = Fetched::default();
    let err = pair(&mut f, b"\nb", vec![None, Some(b"{2}".to_vec())], 0).unwrap_err();
    assert!(
        err.to_string().contains("an inline job without its envelope"),
        "{err}"
    );
}

#[test]
fn lines_and_envelopes_that_differ_in_number_are_refused_not_guessed() {
    let mut f = Fetched::default();
    let envs = vec![
        Some(br#"{"attempt":0,"id":"x\ny","kind":"k"}"#.to_vec()),
        Some(b"{2}".to_vec()),
    ];
    let err = pair(&mut f, b"x\ny\nz", envs, 1).unwrap_err();
    assert!(err.to_string().contains("3 id lines for 2 envelopes"), "{err}");
    assert!(f.jobs.is_empty() && f.bad_ids.is_empty());
}
