//! `ploke`: the terminal client. `ploke up` hosts all four services in this process on loopback
//! (the embedded default); the other commands talk to a gateway, or start the services
//! in-process for the workspace when none serves it.

mod cmd;
mod describe;
mod highlight;
mod tui;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use cmd::Target;
use ploke_proto::rag::v1::SearchFilters;

/// mimalloc reuses freed memory: candle allocates a fresh tensor per operation, and the system
/// allocator returns large ones to the kernel each time (page faults and zeroing cost ~10 % of
/// embedding throughput; docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// ploke: chat with an LLM about your repository, with exact code context.
#[derive(Debug, Parser)]
#[command(name = "ploke", version = ploke_runtime::build::LONG_VERSION)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run all four services in this process on loopback, for one workspace, and index it.
    Up {
        /// The workspace (default: the nearest directory at or above the current one holding
        /// ploke.toml, .ploke or .git, else the current directory). State goes to DIR/.ploke.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Config file (`ploke.toml`) [env: PLOKE_CONFIG].
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Start, print the status and stop (a smoke test of the deployment).
        #[arg(long)]
        check: bool,
        /// Serve without opening the terminal UI (the default when not on a terminal).
        #[arg(long)]
        no_tui: bool,
        /// Listen on PORT (gateway) and the four after it (llm-session, tool-executor,
        /// rag-search, MCP) [default: 50051…50055, or free ports when those are taken].
        #[arg(long, value_name = "PORT")]
        port_base: Option<u16>,
    },
    /// Chat in the terminal UI (a new session, --session ID or --continue to resume one).
    Chat {
        /// Resume this session (its id, or the start of it shown in the status bar).
        #[arg(long, value_name = "ID", conflicts_with = "continue_last")]
        session: Option<String>,
        /// Resume the workspace's most recent session.
        #[arg(long = "continue", short = 'c')]
        continue_last: bool,
        /// Provider name (new sessions).
        #[arg(long)]
        provider: Option<String>,
        /// Model id (new sessions).
        #[arg(long)]
        model: Option<String>,
        #[command(flatten)]
        target: Target,
    },
    /// Ask one question; the answer streams to stdout, tool calls to stderr.
    Ask {
        #[command(flatten)]
        args: cmd::ask::AskArgs,
        #[command(flatten)]
        target: Target,
    },
    /// Search the workspace's code index (no model provider needed).
    Search {
        /// What to look for: words, names (`Type::method`), or text in double quotes found as
        /// written (`ploke search '"error decoding response body"'`).
        query: String,
        /// Retrieval strategy.
        #[arg(long, value_enum, default_value = "hybrid")]
        strategy: cmd::query::StrategyArg,
        /// Hits to show.
        #[arg(long, default_value_t = 10)]
        top_k: u32,
        /// Only code in this language (`rust`, `python`, `typescript`, `go`, …); repeatable.
        #[arg(long = "lang", value_name = "LANGUAGE")]
        languages: Vec<String>,
        /// Only files under this directory or file (relative to the workspace); repeatable.
        #[arg(long = "path", value_name = "PREFIX")]
        paths: Vec<String>,
        #[command(flatten)]
        target: Target,
    },
    /// Index (or re-index with --force) the workspace.
    Index {
        /// Re-read every file.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Your sessions: list (the default), cancel, rm.
    Sessions {
        #[command(subcommand)]
        command: Option<cmd::sessions::SessionsCommand>,
        /// List every principal's sessions, not only yours (admins).
        #[arg(long)]
        everyone: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Review staged edits: list, approve, deny, fetch.
    Edits {
        #[command(subcommand)]
        command: Option<cmd::edits::EditsCommand>,
        #[command(flatten)]
        target: Target,
    },
    /// The workspaces served: list, add (a directory or --git URL), remove.
    Workspaces {
        #[command(subcommand)]
        command: Option<cmd::workspaces::WorkspacesCommand>,
        #[command(flatten)]
        target: Target,
    },
    /// Serve ploke's tools to an MCP client over stdio (the client runs this; docs/MCP.md).
    Mcp {
        /// Largest tool result sent to the client, in tokens [default: [gateway]
        /// mcp_max_result_tokens, 25000].
        #[arg(long, value_name = "N")]
        max_result_tokens: Option<u32>,
        #[command(flatten)]
        target: Target,
    },
    /// Print the configuration in effect here, each value with where it came from.
    Config {
        #[command(flatten)]
        target: Target,
    },
    /// Show the health of a gateway and the services behind it.
    ///
    /// Exits 1 when a service is not SERVING, DEGRADED included (it answers, but part of its
    /// work fails: an index that cannot be written).
    Status {
        /// Gateway URL (default: the `ploke up` serving this directory or one above it, else
        /// http://127.0.0.1:50051).
        #[arg(
            long,
            value_name = "URL",
            env = "PLOKE_GATEWAY",
            hide_env_values = true
        )]
        gateway: Option<String>,
    },
}

/// Runs the command; a failure is printed as one `error: …` line with its causes (never a
/// backtrace, whatever `RUST_BACKTRACE` says: these are the user's errors, not ours).
fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    quiet_when_the_reader_goes();
    let outcome = ploke_runtime::binary::block_on(main_async(cli))
        .map_err(anyhow::Error::from)
        .and_then(|r| r);
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", ploke_runtime::text::with_causes(e.chain()));
            std::process::ExitCode::FAILURE
        }
    }
}

/// A command whose reader went away (`ploke sessions | head -1`) ends as `cat` does, with
/// 128 + SIGPIPE and nothing on stderr, instead of the panic `println!` raises. SIGPIPE itself
/// stays ignored: the services a command may run in this process write to sockets whose peers
/// close, and must get an error there, not the signal.
fn quiet_when_the_reader_goes() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info.payload_as_str().unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        report(info);
    }));
}

async fn main_async(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Up {
            workspace,
            config,
            check,
            no_tui,
            port_base,
        } => cmd::up::up(workspace, config, check, no_tui, port_base).await,
        Command::Ask { args, target } => cmd::ask::ask(&target, args).await,
        Command::Chat {
            session,
            continue_last,
            provider,
            model,
            target,
        } => {
            let which = cmd::chat::Which {
                session,
                last: continue_last,
                provider,
                model,
            };
            cmd::chat::chat(&target, which).await
        }
        Command::Search {
            query,
            strategy,
            top_k,
            languages,
            paths,
            target,
        } => {
            let filters = SearchFilters {
                languages,
                path_prefixes: paths,
                ..SearchFilters::default()
            };
            cmd::query::search(&target, &query, (strategy, top_k), filters).await
        }
        Command::Index { force, target } => cmd::query::index(&target, force).await,
        Command::Sessions {
            command,
            everyone,
            target,
        } => {
            use cmd::sessions::SessionsCommand;
            let command = match command {
                None => SessionsCommand::List { everyone },
                Some(SessionsCommand::List { everyone: asked }) => SessionsCommand::List {
                    everyone: everyone || asked,
                },
                Some(SessionsCommand::Rm { .. } | SessionsCommand::Cancel { .. }) if everyone => {
                    anyhow::bail!(
                        "--everyone lists every principal's sessions; `rm` and `cancel` take ids"
                    )
                }
                Some(other) => other,
            };
            cmd::sessions::run(&target, command).await
        }
        Command::Edits { command, target } => {
            let command = command.unwrap_or(cmd::edits::EditsCommand::List {
                all: false,
                everyone: false,
                diff: true,
            });
            cmd::edits::run(&target, command).await
        }
        Command::Workspaces { command, target } => {
            let command = command.unwrap_or(cmd::workspaces::WorkspacesCommand::List);
            cmd::workspaces::run(&target, command).await
        }
        Command::Mcp {
            max_result_tokens,
            target,
        } => cmd::mcp::mcp(&target, max_result_tokens).await,
        Command::Config { target } => cmd::config::config(&target).await,
        Command::Status { gateway } => {
            let named = gateway.is_some();
            let gateway = gateway.unwrap_or_else(cmd::running::gateway_here);
            let token = std::env::var("PLOKE_TOKEN").ok().filter(|t| !t.is_empty());
            let mut client = match cmd::connect(&gateway, token).await {
                Ok(client) => client,
                // Nothing named and nothing recorded here: say what would serve.
                Err(e) if !named && gateway == cmd::DEFAULT_GATEWAY => {
                    return Err(e.context(
                        "no `ploke up` serves this directory or one above it: start one with \
                         `ploke up`, or name a gateway with --gateway or PLOKE_GATEWAY",
                    ));
                }
                Err(e) => return Err(e),
            };
            let status = cmd::up::system_status(&mut client).await?;
            cmd::up::print_status(&gateway, &status);
            use ploke_proto::gateway::v1::ServingState;
            let states: Vec<ServingState> = status.services.iter().map(|s| s.state()).collect();
            if states
                .iter()
                .any(|s| !matches!(s, ServingState::Serving | ServingState::Degraded))
            {
                anyhow::bail!("some services are not serving");
            }
            if states.contains(&ServingState::Degraded) {
                anyhow::bail!(
                    "some services are degraded (they answer, but not all of their work is done)"
                );
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::Cli;

    #[test]
    fn the_version_is_ploke_the_crate_version_and_the_commit() {
        assert_eq!(
            Cli::command().render_version().to_string(),
            format!(
                "ploke {} ({})\n",
                env!("CARGO_PKG_VERSION"),
                ploke_runtime::build::COMMIT
            )
        );
    }

    /// Every command's `--help`, as a user reads it (80 columns): a flag said twice, an
    /// environment value shown, a changed default all show up here.
    #[test]
    fn help_texts() {
        let mut root = Cli::command().term_width(80);
        root.build();
        let mut all = format!("$ ploke --help\n{}", root.render_long_help());
        for sub in root.get_subcommands_mut() {
            let name = sub.get_name().to_owned();
            all.push_str(&format!(
                "\n$ ploke {name} --help\n{}",
                sub.render_long_help()
            ));
            for nested in sub.get_subcommands_mut() {
                let nested_name = nested.get_name().to_owned();
                if nested_name != "help" {
                    all.push_str(&format!(
                        "\n$ ploke {name} {nested_name} --help\n{}",
                        nested.render_long_help()
                    ));
                }
            }
        }
        insta::assert_snapshot!(all);
    }
}
