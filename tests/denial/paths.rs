//! The path a call names is read out of the caller whole, however long it is: a marker
//! names exactly the path the refused call named.

use crate::support::*;

#[test]
fn a_long_path_is_named_whole_in_its_marker() {
    if !require_full_enforcement() {
        return;
    }
    let env = TestEnv::new();
    // Longer than one short read, and than a page: components of 200 bytes.
    for depth in [3, 19] {
        let mut dir = env.outside.clone();
        for n in 0..depth {
            dir.push(format!("{n:0200}"));
        }
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("new");
        let shown = target.to_string_lossy().into_owned();
        let (out, markers) = env.run_logged(
            "workspace-write",
            &[probe().as_os_str(), "create".as_ref(), target.as_os_str()],
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with("err:"),
            "{}",
            show(&out)
        );
        assert_eq!(markers.len(), 1, "{markers:#?}");
        assert_eq!(markers[0]["op"], "create", "{}", markers[0]);
        assert_eq!(markers[0]["path"].as_str(), Some(shown.as_str()));
        assert!(!target.exists());

        // Control: full access creates it.
        let (out, markers) = env.run_logged(
            "full-access",
            &[probe().as_os_str(), "create".as_ref(), target.as_os_str()],
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "ok",
            "{}",
            show(&out)
        );
        assert!(markers.is_empty() && target.exists());
    }
}
