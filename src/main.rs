//! The `sandgate` binary: all logic lives in the library's pipeline.

fn main() -> std::process::ExitCode {
    sandgate::app::main()
}
