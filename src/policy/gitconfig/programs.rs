//! Which configuration entries name a program git runs: one table, [`RULES`].
//!
//! The table is meant to be broad. Besides the keys git documents as commands (and whole
//! sections that exist to configure programs), it has rules on *key names*: a key that
//! ends in `command`, `cmd`, `program`, `helper`, `editor`, `pager`, `path`, `tool`, … names
//! a program wherever it appears, so a key nobody listed here — a new git release's, a
//! tool's (git-lfs, git-annex) — is caught by its name. Refusing a key that names no
//! program costs one `git config` inside the sandbox; missing one costs the host.
//!
//! Decided against, and why:
//! - `receive.*`: none of its keys names a program; the hooks it runs are files under
//!   `hooks/`, which no sandboxed command can make executable.
//! - `core.worktree`: it names a directory, and git writes it itself for submodules. It may
//!   not change beside a relative `core.hooksPath`, which is found from the working tree
//!   (`check_replacement`).
//! - `core.attributesFile`: it can route files through the user's own filter and diff
//!   drivers, as a `.gitattributes` in the working tree can anyway.
//!
//! Section and key names are compared in git's canonical lowercase, subsections exactly.

use super::parse::Entry;

/// One row of the table.
#[derive(Debug)]
pub struct Rule {
    /// The entries the row covers, as a person would write them (`diff.*.command`).
    pub pattern: &'static str,
    matcher: Matcher,
}

/// How a rule matches an entry.
#[derive(Debug)]
enum Matcher {
    /// Every entry of a section.
    Section(&'static str),
    /// A key of a section, with or without a subsection.
    Key(&'static str, &'static str),
    /// A key, in any section, whose name ends so (or is exactly that); `except` names a
    /// section where the key means something else.
    KeyEnding {
        suffix: &'static str,
        except: Option<&'static str>,
    },
    /// Every entry of a section whose subsection starts so.
    SubsectionPrefix(&'static str, &'static str),
    /// A key of a section whose value starts with `!` (after whitespace): a shell command.
    ShellValue(&'static str, &'static str),
    /// A key, in any section, whose value is a URL for a remote helper
    /// (`<transport>::<address>`): git runs `git-remote-<transport>` (`ext::` runs any
    /// command).
    HelperUrl(&'static str),
}

impl Matcher {
    fn matches(&self, e: &Entry) -> bool {
        match *self {
            Matcher::Section(section) => e.section == section,
            Matcher::Key(section, key) => e.section == section && e.key == key,
            Matcher::KeyEnding { suffix, except } => {
                e.key.ends_with(suffix) && except != Some(e.section.as_str())
            }
            Matcher::SubsectionPrefix(section, prefix) => {
                e.section == section
                    && e.subsection
                        .as_deref()
                        .is_some_and(|s| s.starts_with(prefix.as_bytes()))
            }
            Matcher::ShellValue(section, key) => {
                e.section == section
                    && e.key == key
                    && value(e).trim_ascii_start().first() == Some(&b'!')
            }
            Matcher::HelperUrl(key) => e.key == key && is_helper_url(value(e)),
        }
    }
}

/// An entry's value; the key alone reads as `true`.
fn value(e: &Entry) -> &[u8] {
    e.value.as_deref().unwrap_or(b"true")
}

/// `<transport>::…` as git's `transport_get` recognises it: an alphanumeric, then
/// alphanumerics, `+`, `-` or `.`, then `::`. Leading whitespace is passed over (git
/// would not, but nothing is lost by being broader).
fn is_helper_url(url: &[u8]) -> bool {
    let url = url.trim_ascii_start();
    let scheme = url
        .iter()
        .enumerate()
        .take_while(|&(i, &c)| c.is_ascii_alphanumeric() || (i > 0 && b"+-.".contains(&c)))
        .count();
    scheme > 0 && url[scheme..].starts_with(b"::")
}

/// The table. The first row that matches names the reason in a refusal.
pub const RULES: &[Rule] = &[
    // Keys git documents as programs or shell commands.
    rule("core.fsmonitor", Matcher::Key("core", "fsmonitor")),
    rule("diff.external", Matcher::Key("diff", "external")),
    rule(
        "interactive.diffFilter",
        Matcher::Key("interactive", "difffilter"),
    ),
    rule("init.templateDir", Matcher::Key("init", "templatedir")),
    rule(
        "remote.*.receivepack",
        Matcher::Key("remote", "receivepack"),
    ),
    rule("remote.*.uploadpack", Matcher::Key("remote", "uploadpack")),
    rule("remote.*.vcs", Matcher::Key("remote", "vcs")),
    rule(
        "lfs.standalonetransferagent",
        Matcher::Key("lfs", "standalonetransferagent"),
    ),
    // Not a program, but a file on the host that git writes (with http.saveCookies).
    rule("http.*.cookieFile", Matcher::Key("http", "cookiefile")),
    rule(
        "submodule.*.update = !…",
        Matcher::ShellValue("submodule", "update"),
    ),
    rule("*.url = <transport>::…", Matcher::HelperUrl("url")),
    rule("*.pushurl = <transport>::…", Matcher::HelperUrl("pushurl")),
    rule(
        "lfs.customtransfer.*",
        Matcher::SubsectionPrefix("lfs", "customtransfer."),
    ),
    rule(
        "lfs.extension.*",
        Matcher::SubsectionPrefix("lfs", "extension."),
    ),
    // Sections that exist to configure programs, or that can run or enable any.
    // An alias runs whatever git command it names, with its options (`rebase -x`,
    // `difftool -x`, `submodule foreach`), and shadows the user's own alias.
    rule("alias.*", Matcher::Section("alias")),
    rule("pager.*", Matcher::Section("pager")),
    rule("difftool.*", Matcher::Section("difftool")),
    rule("mergetool.*", Matcher::Section("mergetool")),
    rule("filter.*", Matcher::Section("filter")),
    rule("credential.*", Matcher::Section("credential")),
    rule("gpg.*", Matcher::Section("gpg")),
    // An included file is read as configuration, unchecked.
    rule("include.*", Matcher::Section("include")),
    rule("includeIf.*", Matcher::Section("includeif")),
    rule("uploadpack.*", Matcher::Section("uploadpack")),
    // `protocol.ext.allow` enables the `ext::` transport, which runs any command.
    rule("protocol.*", Matcher::Section("protocol")),
    // `url.<base>.insteadOf` rewrites the user's URLs, to `ext::…` among others.
    rule("url.*", Matcher::Section("url")),
    rule("sendemail.*", Matcher::Section("sendemail")),
    rule("instaweb.*", Matcher::Section("instaweb")),
    rule("man.*", Matcher::Section("man")),
    rule("web.*", Matcher::Section("web")),
    rule("browser.*", Matcher::Section("browser")),
    rule("guitool.*", Matcher::Section("guitool")),
    // Configuration-defined hooks (`hook.<name>.command`).
    rule("hook.*", Matcher::Section("hook")),
    // Key names that mean a program wherever they appear.
    rule("*.*command", ending("command")),
    rule("*.*cmd", ending("cmd")),
    rule("*.*program", ending("program")),
    rule("*.*helper", ending("helper")),
    rule("*.*editor", ending("editor")),
    rule("*.*pager", ending("pager")),
    rule("*.*askpass", ending("askpass")),
    rule("*.*textconv", ending("textconv")),
    rule("*.*driver", ending("driver")),
    rule("*.*tool", ending("tool")),
    rule("*.*browser", ending("browser")),
    rule("*.*viewer", ending("viewer")),
    rule("*.*proxy", ending("proxy")),
    rule("*.*hook", ending("hook")),
    rule("*.*tunnel", ending("tunnel")),
    rule("*.clean", ending("clean")),
    rule("*.smudge", ending("smudge")),
    rule("*.process", ending("process")),
    // `core.hooksPath`, `include.path`, `mergetool.*.path`, … but not the checkout
    // directory `submodule.*.path`.
    rule(
        "*.*path (not submodule.*.path)",
        Matcher::KeyEnding {
            suffix: "path",
            except: Some("submodule"),
        },
    ),
];

const fn rule(pattern: &'static str, matcher: Matcher) -> Rule {
    Rule { pattern, matcher }
}

const fn ending(suffix: &'static str) -> Matcher {
    Matcher::KeyEnding {
        suffix,
        except: None,
    }
}

/// The first rule by which `entry` names a program, if any.
pub fn names_program(entry: &Entry) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.matcher.matches(entry))
}

#[cfg(test)]
mod tests {
    use super::super::parse::parse;
    use super::*;

    /// The row that the single entry of `text` matches.
    fn row_of(text: &str) -> Option<&'static str> {
        let entries = parse(text.as_bytes()).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(entries.len(), 1, "{text:?}");
        names_program(&entries[0]).map(|r| r.pattern)
    }

    /// One test per row: an entry the row, and no row before it, refuses.
    macro_rules! rows {
        ($($test:ident: $pattern:literal <- $text:literal;)*) => {
            $(
                #[test]
                fn $test() {
                    assert_eq!(row_of($text), Some($pattern), "{:?}", $text);
                }
            )*
            const TESTED: &[&str] = &[$($pattern),*];
        };
    }

    rows! {
        core_fsmonitor: "core.fsmonitor" <- "[core]\n\tfsmonitor = false";
        diff_external: "diff.external" <- "[diff]\n\texternal = my-diff";
        interactive_diff_filter: "interactive.diffFilter" <- "[interactive]\n\tdiffFilter = d";
        init_template_dir: "init.templateDir" <- "[init]\n\ttemplateDir = /t";
        remote_receivepack: "remote.*.receivepack" <- "[remote \"o\"]\n\treceivepack = rp";
        remote_uploadpack: "remote.*.uploadpack" <- "[remote \"o\"]\n\tuploadpack = up";
        remote_vcs: "remote.*.vcs" <- "[remote \"o\"]\n\tvcs = hg";
        lfs_standalone_agent: "lfs.standalonetransferagent" <- "[lfs]\n\tstandalonetransferagent = a";
        http_cookie_file: "http.*.cookieFile" <- "[http \"https://h/\"]\n\tcookieFile = ~/.bashrc";
        submodule_update_shell: "submodule.*.update = !…" <- "[submodule \"s\"]\n\tupdate = \" !sh -c x\"";
        helper_url: "*.url = <transport>::…" <- "[remote \"o\"]\n\turl = ext::sh -c x";
        helper_pushurl: "*.pushurl = <transport>::…" <- "[remote \"o\"]\n\tpushurl = foo+bar::x";
        lfs_custom_transfer: "lfs.customtransfer.*" <- "[lfs \"customtransfer.t\"]\n\targs = x";
        lfs_extension: "lfs.extension.*" <- "[lfs \"extension.e\"]\n\tpriority = 0";
        alias: "alias.*" <- "[alias]\n\tco = rebase -x 'sh -c x'";
        pager_section: "pager.*" <- "[pager]\n\tlog = sh -c x";
        difftool: "difftool.*" <- "[difftool \"t\"]\n\ttrustExitCode = true";
        mergetool: "mergetool.*" <- "[mergetool]\n\tprompt = false";
        filter: "filter.*" <- "[filter \"f\"]\n\trequired";
        credential: "credential.*" <- "[credential \"https://h\"]\n\tusername = u";
        gpg: "gpg.*" <- "[gpg]\n\tformat = ssh";
        include: "include.*" <- "[include]\n\tpath = other";
        include_if: "includeIf.*" <- "[includeIf \"onbranch:main\"]\n\tpath = other";
        uploadpack: "uploadpack.*" <- "[uploadpack]\n\tallowFilter = true";
        protocol: "protocol.*" <- "[protocol \"ext\"]\n\tallow = always";
        url: "url.*" <- "[url \"ext::sh -c x #\"]\n\tinsteadOf = https://";
        sendemail: "sendemail.*" <- "[sendemail]\n\tsmtpServer = /bin/sh";
        instaweb: "instaweb.*" <- "[instaweb]\n\thttpd = sh";
        man: "man.*" <- "[man \"v\"]\n\tfoo = bar";
        web: "web.*" <- "[web]\n\tbrowser = b";
        browser: "browser.*" <- "[browser \"b\"]\n\tfoo = bar";
        guitool: "guitool.*" <- "[guitool \"t\"]\n\tfoo = bar";
        hook: "hook.*" <- "[hook \"h\"]\n\tevent = pre-commit";
        command: "*.*command" <- "[core]\n\tsshCommand = ssh -oProxyCommand=x";
        cmd: "*.*cmd" <- "[trailer \"t\"]\n\tcmd = x";
        program: "*.*program" <- "[someTool]\n\tprogram = x";
        helper: "*.*helper" <- "[someTool \"x\"]\n\thelper = x";
        editor: "*.*editor" <- "[sequence]\n\teditor = x";
        pager_key: "*.*pager" <- "[core]\n\tpager = x";
        askpass: "*.*askpass" <- "[core]\n\taskPass = x";
        textconv: "*.*textconv" <- "[diff \"d\"]\n\ttextconv = x";
        driver: "*.*driver" <- "[merge \"m\"]\n\tdriver = x";
        tool: "*.*tool" <- "[merge]\n\ttool = x";
        browser_key: "*.*browser" <- "[help]\n\tbrowser = x";
        viewer: "*.*viewer" <- "[someTool]\n\tviewer = x";
        proxy: "*.*proxy" <- "[core]\n\tgitProxy = x";
        hook_key: "*.*hook" <- "[someTool]\n\tpostHook = x";
        tunnel: "*.*tunnel" <- "[imap]\n\ttunnel = x";
        clean: "*.clean" <- "[someTool \"d\"]\n\tclean = x";
        smudge: "*.smudge" <- "[someTool \"d\"]\n\tsmudge = x";
        process: "*.process" <- "[someTool \"d\"]\n\tprocess = x";
        path: "*.*path (not submodule.*.path)" <- "[core]\n\thooksPath = h";
    }

    #[test]
    fn every_row_is_tested() {
        let untested: Vec<_> = RULES
            .iter()
            .map(|r| r.pattern)
            .filter(|p| !TESTED.contains(p))
            .collect();
        assert!(untested.is_empty(), "rows without a test: {untested:?}");
    }

    #[test]
    fn the_brief_examples_are_caught() {
        for text in [
            "[core]\n\tfsmonitor = true",
            "[core]\n\thooksPath = .githooks",
            "[core]\n\teditor = vim",
            "[core]\n\talternateRefsCommand = x",
            "[alias]\n\tst = ! sh -c x",
            "[diff \"d\"]\n\tcommand = x",
            "[merge \"m\"]\n\tdriver = x",
            "[filter \"lfs\"]\n\tsmudge = git-lfs smudge %f",
            "[credential]\n\thelper = store",
            "[gpg \"ssh\"]\n\tdefaultKeyCommand = x",
            "[tar \"tgz\"]\n\tcommand = gzip",
            "[trailer \"t\"]\n\tcommand = x",
            "[lfs \"customtransfer.t\"]\n\tpath = x",
            "[lfs \"extension.e\"]\n\tclean = x",
            "[mergetool \"m\"]\n\tpath = x",
            "[submodule \"s\"]\n\tupdate = !x",
            "[submodule \"s\"]\n\turl = ext::sh -c x",
            "[remote.o]\n\turl = fd::1",
            "[Core]\n\tFSMonitor = x",
        ] {
            assert!(row_of(text).is_some(), "{text:?} names no program");
        }
    }

    #[test]
    fn what_git_itself_writes_names_no_program() {
        for text in [
            "[core]\n\trepositoryformatversion = 0",
            "[core]\n\tfilemode = true",
            "[core]\n\tbare = false",
            "[core]\n\tlogallrefupdates = true",
            "[core]\n\tworktree = ../../../sub",
            "[core]\n\tsharedRepository = 1",
            "[core]\n\tsparseCheckout = true",
            "[receive]\n\tdenyNonFastforwards = true",
            "[remote \"origin\"]\n\turl = https://example.com/r.git",
            "[remote \"origin\"]\n\turl = git@example.com:r.git",
            "[remote \"origin\"]\n\turl = ssh://[::1]/r.git",
            "[remote \"origin\"]\n\turl = /srv/r.git",
            "[remote \"origin\"]\n\tfetch = +refs/heads/*:refs/remotes/origin/*",
            "[remote \"origin\"]\n\tpromisor = true",
            "[remote \"origin\"]\n\tpartialclonefilter = blob:none",
            "[branch \"main\"]\n\tremote = origin",
            "[branch \"main\"]\n\tmerge = refs/heads/main",
            "[submodule \"sub\"]\n\turl = ../sub",
            "[submodule \"sub\"]\n\tactive = true",
            "[submodule \"sub\"]\n\tpath = sub",
            "[submodule \"sub\"]\n\tupdate = rebase",
            "[user]\n\temail = a@example.com",
            "[extensions]\n\tworktreeConfig = true",
            "[extensions]\n\tpartialclone = origin",
            "[lfs]\n\trepositoryformatversion = 0",
            "[lfs \"https://example.com/r.git/info/lfs\"]\n\taccess = basic",
            "[gui]\n\twmstate = normal",
            "[maintenance]\n\tauto = false",
            "[index]\n\tsparse = true",
            "[init]\n\tdefaultBranch = main",
        ] {
            assert_eq!(row_of(text), None, "{text:?}");
        }
    }

    #[test]
    fn helper_urls_are_recognised_as_git_does() {
        for (url, helper) in [
            ("ext::sh -c x", true),
            ("  ext::x", true),
            ("a1+b-c.d::x", true),
            ("9p::x", true),
            ("+a::x", false),
            ("https://h/r", false),
            ("[::1]:r", false),
            ("::x", false),
            ("ext:x", false),
        ] {
            assert_eq!(is_helper_url(url.as_bytes()), helper, "{url:?}");
        }
    }
}
