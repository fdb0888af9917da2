"""``nlu-engine``: train, parse, shell, data tools. Thin wrappers over plain functions.

Heavy libraries (TensorFlow, scikit-learn) are imported inside the commands that use them,
so ``nlu-engine --help`` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nlu_engine import __version__
from nlu_engine.cli import allow, parse_corpus
from nlu_engine.contract.errors import NOTICE, NLUError

logger = logging.getLogger(__name__)

DEFAULT_MODELS = "models"
DEFAULT_DOMAIN = "domain.yml"  # Rasa's default, in the working folder
DEFAULT_CONFIG = "config.yml"  # Rasa's default, in the working folder
EXTRA_COMMANDS = (
    "nlu_engine.cli.evaluate",  # nlu-engine test
    "nlu_engine.cli.serve",  # nlu-engine serve / run
    "nlu_engine.cli.benchmark",  # nlu-engine benchmark
    "nlu_engine.cli.review",  # nlu-engine review / review compare
    "nlu_engine.cli.download",  # nlu-engine download
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nlu-engine",
        description="Intent classification and entity extraction for chatbots (Rasa NLU compatible).",
    )
    parser.add_argument("--version", action="version", version=f"nlu_engine {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    train = commands.add_parser("train", help="train a model from NLU data and a config.yml")
    train.add_argument("-c", "--config", default=None,
                       help="config.yml, or a shipped pipeline by name: diet (the default), logreg, ...")
    train.add_argument("--data", "--nlu", action="append", required=True, metavar="PATH",
                       help="training data file or folder; repeat for several")
    train.add_argument("--out", default=DEFAULT_MODELS, help="folder for the archive (default: models)")
    train.add_argument("--fixed-model-name", default=None, help="archive name instead of nlu-<timestamp>")
    train.add_argument("--set", action="append", default=[], metavar="COMPONENT.KEY=VALUE",
                       help="override a parameter, e.g. DIETClassifier.epochs=5")
    train.add_argument("--finetune", nargs="?", const=True, default=None, metavar="MODEL",
                       help="continue a trained model (an archive or folder; default: the newest "
                            "in --out) on the data, which may add intents, entity types and "
                            "words; --config defaults to the model's")
    train.add_argument("--epoch-fraction", type=float, default=None, metavar="F",
                       help="with --finetune: the share of a full training's epochs (default 0.3)")
    train.add_argument("--rehearsal-fraction", type=float, default=None, metavar="F",
                       help="with --finetune: the share of the examples the model already knew "
                            "mixed into each epoch (default 0.2)")
    allow.add_arguments(train, config=False)  # with --finetune: the model's custom components
    train.add_argument("-d", "--domain", default=None,
                       help="Rasa domain file or folder: responses of retrieval intents "
                            f"(default: {DEFAULT_DOMAIN} when it exists)")
    train.set_defaults(func=cmd_train)

    parse = commands.add_parser(
        "parse", help="parse a message, one message per line of stdin, or a corpus file (--input)")
    parse.add_argument("text", nargs="?", help="the message; omit to read stdin")
    parse.add_argument("-m", "--model", default=DEFAULT_MODELS, help="archive or folder (newest)")
    parse.add_argument("--batch-size", type=int, default=64,
                       help="messages parsed as one batch (default: 64)")
    allow.add_arguments(parse)
    allow.add_runtime_argument(parse)
    parse_corpus.add_arguments(parse)
    parse.set_defaults(func=cmd_parse)

    shell = commands.add_parser("shell", help="type messages and read the parse")
    shell.add_argument("-m", "--model", default=DEFAULT_MODELS)
    shell.add_argument("--server", default=None, help="URL of a running nlu-engine server")
    shell.add_argument("--token", default=None, help="auth token for --server")
    allow.add_arguments(shell)
    shell.set_defaults(func=cmd_shell)

    _add_data_commands(commands)

    # Further commands live in their own modules, each with `register(commands)`; they must
    # import nothing heavy at module level.
    for module_name in EXTRA_COMMANDS:
        importlib.import_module(module_name).register(commands)
    return parser


def _add_data_commands(commands: Any) -> None:
    """`nlu-engine data validate / convert / split`."""
    data = commands.add_parser("data", help="validate, convert and split training data")
    data_commands = data.add_subparsers(dest="data_command", metavar="DATA_COMMAND", required=True)
    validate = data_commands.add_parser("validate", help="counts and warnings")
    validate.add_argument("--data", "--nlu", action="append", required=True, metavar="PATH")
    validate.add_argument("-d", "--domain", default=None,
                          help="Rasa domain to check the data against "
                               f"(default: {DEFAULT_DOMAIN} when it exists)")
    validate.add_argument("-c", "--config", default=None,
                          help="config whose language: and tokenizer the data is checked against "
                               f"(default: {DEFAULT_CONFIG} when it exists, else English with "
                               "WhitespaceTokenizer)")
    validate.add_argument("--fail-on-warnings", action="store_true")
    validate.set_defaults(func=cmd_data_validate)
    convert = data_commands.add_parser("convert", help="convert between YAML, Markdown and JSON")
    convert.add_argument("--data", "--nlu", action="append", required=True, metavar="PATH")
    convert.add_argument("--out", required=True)
    convert.add_argument("-f", "--format", choices=["yaml", "json"], required=True)
    convert.set_defaults(func=cmd_data_convert)
    split = data_commands.add_parser("split", help="stratified train/test split")
    split.add_argument("--data", "--nlu", action="append", required=True, metavar="PATH")
    split.add_argument("--training-fraction", type=float, default=0.8)
    split.add_argument("--random-seed", type=int, default=42)
    split.add_argument("--out", default="train_test_split")
    split.add_argument("-f", "--format", choices=["yaml", "json"], default="yaml")
    split.set_defaults(func=cmd_data_split)


# --- commands ----------------------------------------------------------------------------------
def domain_path(given: str | None) -> str | None:
    """``--domain``, else Rasa's default ``domain.yml`` when the working folder has one."""
    if given is not None or not Path(DEFAULT_DOMAIN).is_file():
        return given
    print(f"notice: using {DEFAULT_DOMAIN} from the working folder (Rasa's default; --domain "
          "names another)", file=sys.stderr)
    return DEFAULT_DOMAIN


def cmd_train(args: argparse.Namespace) -> int:
    from nlu_engine.assembly.model import train
    from nlu_engine.contract.component import FinetuneOptions

    fractions = {"epoch_fraction": args.epoch_fraction, "rehearsal_fraction": args.rehearsal_fraction}
    given = {key: value for key, value in fractions.items() if value is not None}
    if (given or args.allow_component) and args.finetune is None:
        flags = ["--" + key.replace("_", "-") for key in given]
        flags += ["--allow-component"] if args.allow_component else []
        raise NLUError(f"{', '.join(flags)} only apply with --finetune")
    train(args.config, args.data, out=args.out, fixed_model_name=args.fixed_model_name,
          overrides=args.set, finetune=args.finetune, finetune_options=FinetuneOptions(**given),
          allow_components=args.allow_component, domain=domain_path(args.domain))
    return 0


def _read_lines(stream: Any, batch_size: int) -> Iterator[list[str]]:
    """Batches of non-empty lines; line by line when a person is typing."""
    interactive = stream.isatty()
    batch: list[str] = []
    for line in stream:
        text = line.rstrip("\r\n")
        if not text.strip():
            continue
        batch.append(text)
        if interactive or len(batch) >= batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def cmd_parse(args: argparse.Namespace) -> int:
    if args.input is not None or args.output is not None:
        return parse_corpus.run(args)
    if args.ray or args.ray_address is not None or args.workers is not None:
        raise NLUError("--ray, --ray-address and --workers parse a corpus file: add --input IN --output OUT")
    from nlu_engine.assembly.model import Model

    model = Model.load(args.model, allow.allowed(args.allow_component, args.config), args.runtime)
    if args.text is not None:
        print(json.dumps(model.parse(args.text), ensure_ascii=False, indent=2))
        return 0
    for batch in _read_lines(sys.stdin, max(1, args.batch_size)):
        for result in model.parse_batch(batch):
            sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    return 0


def format_parse(result: dict[str, Any]) -> str:
    """A readable summary of a parse result for the shell."""
    intent = result.get("intent") or {}
    lines = [f"intent: {intent.get('name')} ({intent.get('confidence', 0.0):.3f})"]
    for entity in result.get("entities", []):
        extras = "".join(
            f" {k}={entity[k]}" for k in ("role", "group") if entity.get(k) is not None
        )
        confidence = entity.get("confidence_entity")
        conf = f" ({confidence:.3f})" if isinstance(confidence, int | float) else ""
        lines.append(f"  {entity['entity']}: {entity['value']!r}{extras}{conf}"
                     f" [{entity.get('extractor', '')}]")
    ranking = result.get("intent_ranking") or []
    if len(ranking) > 1:
        lines.append("  ranking: " + ", ".join(
            f"{r['name']} {r['confidence']:.3f}" for r in ranking[:5]))
    return "\n".join(lines)


def cmd_shell(args: argparse.Namespace) -> int:
    if args.server:
        from nlu_engine.cli.remote import RemoteParser

        parse = RemoteParser(args.server, args.token).parse
    else:
        from nlu_engine.assembly.model import Model

        parse = Model.load(args.model, allow.allowed(args.allow_component, args.config)).parse
    print("Type a message and press enter (Ctrl-D to quit; /json for the full JSON).")
    show_json = False
    answered = False
    while True:
        try:
            text = input("> ")
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        if text.strip() == "/json":
            show_json = not show_json
            print(f"full JSON {'on' if show_json else 'off'}")
            continue
        if not text.strip():
            continue
        try:
            result = parse(text)
        except NLUError as error:
            if not answered:  # nothing has worked yet (e.g. no server there): stop with the error
                raise
            print(f"error: {error}")  # the server went away mid-session: say so and keep going
            continue
        answered = True
        print(json.dumps(result, ensure_ascii=False, indent=2) if show_json else format_parse(result))


def validation_tokenizer(config_path: str | None, data: Any) -> tuple[str | None, Any]:
    """The config's language and the tokenizer it resolves to, trained on ``data`` (a
    segmenter learns the word splits the annotations teach); without a config, or with a
    tokenizer that needs another component first (SpacyTokenizer), WhitespaceTokenizer."""
    from nlu_engine.assembly.config import load_config
    from nlu_engine.contract.component import TOKENS
    from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer

    if config_path is None and Path(DEFAULT_CONFIG).is_file():
        config_path = DEFAULT_CONFIG
    if config_path is None:
        return None, WhitespaceTokenizer()
    config = load_config(config_path)
    for notice in config.notices:
        print(f"notice: {notice}", file=sys.stderr)
    step = next((s for s in config.steps if TOKENS in s.cls.provides), None)
    if step is None or step.cls.requires:
        return config.language, WhitespaceTokenizer()
    tokenizer = step.cls(step.config)
    tokenizer.language = config.language
    tokenizer.train(data)
    return config.language, tokenizer


def cmd_data_validate(args: argparse.Namespace) -> int:
    from nlu_engine.contract.message import TEXT, Message
    from nlu_engine.training_data.project import read_project
    from nlu_engine.training_data.validation import domain_warnings, validate

    project = read_project(args.data, domain_path(args.domain))
    for entry in project.skipped_files:
        logger.warning(f"skipped {entry}")
    if project.notice():
        print(f"notice: {project.notice()}", file=sys.stderr)
    language, tokenizer = validation_tokenizer(args.config, project.data)
    report = validate(project.data, tokenize=lambda text: tokenizer.tokenize(Message(text=text), TEXT),
                      duplicates=project.duplicates, domain=project.domain, language=language)
    if project.domain is not None:
        report.warnings.extend(domain_warnings(project.data, project.domain, project.story_intents))
    print(report.format())
    if report.warnings and args.fail_on_warnings:
        raise NLUError(f"{len(report.warnings)} warnings in the training data (--fail-on-warnings)")
    return 0


def cmd_data_convert(args: argparse.Namespace) -> int:
    from nlu_engine.training_data import load_data, write_data

    data = load_data(args.data)
    if args.format == "json" and data.responses:
        logger.warning(f"Rasa's JSON format has no place for the {len(data.responses)} responses; "
                       "they are left out (keep them in a YAML file)")
    write_data(data, Path(args.out), args.format)
    print(f"wrote {len(data.messages)} examples to {args.out}")
    return 0


def cmd_data_split(args: argparse.Namespace) -> int:
    from nlu_engine.training_data import load_data, write_data
    from nlu_engine.training_data.split import train_test_split

    if not 0.0 < args.training_fraction < 1.0:
        raise NLUError("--training-fraction must be between 0 and 1 (exclusive), e.g. 0.8")
    data = load_data(args.data)
    train, test = train_test_split(data, args.training_fraction, args.random_seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "yml" if args.format == "yaml" else "json"
    write_data(train, out / f"training_data.{suffix}", args.format)
    write_data(test, out / f"test_data.{suffix}", args.format)
    print(f"{len(train.messages)} training and {len(test.messages)} test examples written to {out}")
    return 0


# --- warnings ------------------------------------------------------------------------------------
class OneLineFormatter(logging.Formatter):
    """``warning: <message>``: the level in lower case, the message on one line, no traceback."""

    def format(self, record: logging.LogRecord) -> str:
        message = " ".join(line.strip() for line in record.getMessage().splitlines())
        return f"{record.levelname.lower()}: {message}"


class StderrHandler(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is when a record comes (tests swap it between commands)."""

    def __init__(self) -> None:
        super().__init__()
        self.setLevel(NOTICE)
        self.setFormatter(OneLineFormatter())

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        """Ignored: the stream is always the current ``sys.stderr``."""


def show_warnings() -> None:
    """Every warning of the package's loggers (``nlu_engine.*``) as one ``warning: ...`` line on
    stderr. Installed once per process; the server replaces it with its own log format."""
    package = logging.getLogger("nlu_engine")
    if not any(isinstance(handler, StderrHandler) for handler in package.handlers):
        package.addHandler(StderrHandler())


@contextmanager
def notices_shown() -> Iterator[None]:
    """The package's notices (level 25) reach the handlers while a command runs: a logger left
    at NOTSET takes the root's WARNING, which drops them before any handler sees them (a
    component's ``logger.log(NOTICE, ...)`` would never be shown). The level is restored after,
    so a program calling ``main`` keeps its own."""
    package = logging.getLogger("nlu_engine")
    level = package.level
    if level == logging.NOTSET or level > NOTICE:
        package.setLevel(NOTICE)
    try:
        yield
    finally:
        package.setLevel(level)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    show_warnings()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    with notices_shown():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    """The command, with a user's error as one line (exit 1) and an internal one as one line
    (exit 3) unless ``--debug``."""
    try:
        return int(args.func(args) or 0)
    except NLUError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; nothing was written", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as error:  # an internal error: one line unless --debug
        if args.debug:
            raise
        print(f"internal error: {type(error).__name__}: {error} (rerun with --debug for details)",
              file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
