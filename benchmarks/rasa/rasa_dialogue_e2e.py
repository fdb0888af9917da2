"""An unmodified Rasa 3.6 dialogue server with `nlu-engine serve` as its NLU, checked through
Rasa's REST channel, with and without a token.

    .venv/bin/python -m benchmarks.rasa.rasa_dialogue_e2e [--project examples/rasa_init] [--epochs N]

Needs Rasa's venv (`../shared/tools/rasa-reference setup`; `$RASA_VENV`, default ${TMPDIR:-/tmp}/rasa-ref).
For the project (default: both examples) it

1. trains nlu_engine on the project as it is (`nlu-engine train --config config.yml --data data
   --domain domain.yml`) and Rasa's dialogue model (`rasa train core`, Rasa's own command);
2. per case (no token; a token in `endpoints.yml`; a wrong token) starts `nlu-engine serve`, the
   project's custom actions on Rasa's own rasa-sdk when its domain names some
   (`examples/action_server`, which asks the same nlu-engine server), and `rasa run --enable-api`
   with an `endpoints.yml` whose `nlu:` entry names our server;
3. holds the conversations below through `POST /webhooks/rest/webhook` and checks each turn: the
   bot's messages must be the responses its rules and stories give (texts from `domain.yml`,
   `{slot}` filled from the tracker), and the slots must hold the entities.

The wrong token is a control: the bot must fail there (Rasa gets 401 and an empty intent).
Writes a JSON result (default benchmark_results/rasa_dialogue_e2e.json) and exits 1 when a turn
of the no-token or token case fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from benchmarks.common import RASA_VENV, RESULTS, ROOT
from nlu_engine.server.process import ServerProcess, free_port

RASA_ENV = {"RASA_TELEMETRY_ENABLED": "false", "SQLALCHEMY_SILENCE_UBER_WARNING": "1",
            "TF_CPP_MIN_LOG_LEVEL": "2"}
TOKEN = "e2e-nlu-token"

# project -> conversations: (user message, expected bot responses, expected slots after the turn).
# A response is a domain response name, or "action:<name>" with a pattern its text must match.
CONVERSATIONS: dict[str, list[list[tuple[str, list[str], dict[str, str]]]]] = {
    "rasa_init": [[
        ("hello", ["utter_greet"], {}),
        ("I am great", ["utter_happy"], {}),
        ("are you a bot?", ["utter_iamabot"], {}),
        ("bye", ["utter_goodbye"], {}),
    ]],
    "travel_assistant": [
        [
            ("hi", ["utter_greet"], {}),
            ("I want to fly from Berlin to Lisbon", ["utter_flights_to_destination"],
             {"departure": "Berlin", "destination": "Lisbon"}),
            ("can I bring my dog on the plane?", ["utter_faq/ask_pets"], {}),
            ("/greet", ["utter_greet"], {}),  # a button's payload goes to the NLU server too
            ("are you a bot?", ["utter_iamabot"], {}),
            ("bye", ["utter_goodbye"], {}),
        ],
        [
            ("I need to book a flight", ["utter_ask_destination"], {}),
            ("hmm somewhere warm, maybe Athens", ["utter_flights_to_destination"],
             {"destination": "Athens"}),
            ("a double room with breakfast in Rome", ["action:action_trip_summary:^Booking: .*Rome"], {}),
            ("thanks", ["utter_welcome"], {}),
        ],
    ],
}


# --- processes ---------------------------------------------------------------------------------
def http_json(url: str, body: Any = None, timeout: float = 60) -> Any:
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read() or b"null")


def wait_for(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{process.args[0]} exited; its log:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise SystemExit(f"{url} not ready after {timeout:.0f} s; log:\n{log.read_text()[-3000:]}")


def start(command: list[str], log: Path, cwd: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    handle = log.open("wb")
    return subprocess.Popen(command, cwd=cwd, stdout=handle, stderr=subprocess.STDOUT,
                            env={**os.environ, **env}, start_new_session=True)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group it leads (rasa starts workers), then SIGKILL."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


# --- training ----------------------------------------------------------------------------------
def train_models(project: Path, work: Path, epochs: int | None) -> tuple[Path, Path]:
    """Our NLU archive and Rasa's dialogue archive for ``project``."""
    overrides = [] if epochs is None else [
        "--set", f"DIETClassifier.epochs={epochs}", "--set", f"ResponseSelector.epochs={epochs}"]
    start_time = time.perf_counter()
    with (work / "nlu_train.log").open("wb") as log:
        subprocess.run([sys.executable, "-m", "nlu_engine", "train", "--config", "config.yml", "--data",
                        "data", "--domain", "domain.yml", "--out", str(work), "--fixed-model-name", "nlu",
                        *overrides], cwd=project, check=True, stdout=log, stderr=subprocess.STDOUT,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    notice = [line for line in (work / "nlu_train.log").read_text().splitlines() if "skipped" in line]
    print(f"nlu_engine trained in {time.perf_counter() - start_time:.0f} s; {' '.join(notice)}", flush=True)
    start_time = time.perf_counter()
    with (work / "rasa_train.log").open("wb") as log:
        subprocess.run([str(RASA_VENV / "bin" / "rasa"), "train", "core", "-c", str(project / "config.yml"),
                        "-d", str(project / "domain.yml"), "-s", str(project / "data"), "--out",
                        str(work / "core"), "--fixed-model-name", "core"],
                       cwd=work, check=True, stdout=log, stderr=subprocess.STDOUT,
                       env={**os.environ, **RASA_ENV})
    print(f"Rasa's dialogue model trained in {time.perf_counter() - start_time:.0f} s", flush=True)
    return work / "nlu.tar.gz", work / "core" / "core.tar.gz"


# --- one case: servers up, conversations, servers down ------------------------------------------
def write_endpoints(work: Path, nlu_url: str, token: str | None, action_url: str | None) -> Path:
    endpoints: dict[str, Any] = {"nlu": {"url": nlu_url, **({"token": token} if token else {})}}
    if action_url:
        endpoints["action_endpoint"] = {"url": action_url}
    path = work / "endpoints.yml"
    path.write_text(yaml.safe_dump(endpoints), encoding="utf-8")
    (work / "credentials.yml").write_text("rest:\n", encoding="utf-8")
    return path


def run_case(project: Path, work: Path, models: tuple[Path, Path], server_token: str | None,
             client_token: str | None) -> list[dict[str, Any]]:
    """Start the servers, hold the conversations, stop the servers; one row per turn."""
    nlu_args = ["-m", str(models[0]), *(["--auth-token", server_token] if server_token else [])]
    domain = yaml.safe_load((project / "domain.yml").read_text(encoding="utf-8"))
    processes: list[subprocess.Popen[bytes]] = []
    with ServerProcess(nlu_args) as nlu:
        try:
            action_url = None
            if domain.get("actions"):
                port = free_port()
                env = {"PYTHONPATH": str(ROOT), "NLU_ENGINE_URL": nlu.url,
                       "NLU_ENGINE_TOKEN": server_token or "", **RASA_ENV}
                command = [str(RASA_VENV / "bin" / "python"), "-m", "rasa_sdk", "--actions",
                           "examples.action_server.actions", "--port", str(port)]
                processes.append(start(command, work / "actions.log", ROOT, env))
                wait_for(f"http://127.0.0.1:{port}/health", processes[-1], work / "actions.log")
                action_url = f"http://127.0.0.1:{port}/webhook"
            endpoints = write_endpoints(work, nlu.url, client_token, action_url)
            port = free_port()
            command = [str(RASA_VENV / "bin" / "rasa"), "run", "-m", str(models[1]), "--endpoints",
                       str(endpoints), "--credentials", str(work / "credentials.yml"),
                       "--enable-api", "-i", "127.0.0.1", "-p", str(port)]
            processes.append(start(command, work / "rasa_run.log", work, RASA_ENV))
            rasa = f"http://127.0.0.1:{port}"
            wait_for(rasa + "/status", processes[-1], work / "rasa_run.log")
            return converse(rasa, domain, CONVERSATIONS[project.name])
        finally:
            for process in reversed(processes):
                stop(process)


Turn = tuple[str, list[str], dict[str, str]]


def converse(rasa: str, domain: dict[str, Any], conversations: list[list[Turn]]) -> list[dict[str, Any]]:
    rows = []
    for number, turns in enumerate(conversations):
        sender = f"e2e-{number}-{time.time_ns()}"
        for text, expected, slots in turns:
            answers = http_json(f"{rasa}/webhooks/rest/webhook", {"sender": sender, "message": text})
            tracker = http_json(f"{rasa}/conversations/{sender}/tracker")
            got = [a.get("text") for a in answers or []]
            wanted = [expected_text(name, domain, tracker["slots"]) for name in expected]
            ok = len(got) == len(wanted) and all(matches(g, w) for g, w in zip(got, wanted, strict=True))
            slots_ok = all(tracker["slots"].get(k) == v for k, v in slots.items())
            rows.append({"conversation": number, "user": text, "bot": got, "expected": wanted,
                         "intent": (tracker.get("latest_message") or {}).get("intent", {}).get("name"),
                         "slots": {k: tracker["slots"].get(k) for k in slots}, "passed": ok and slots_ok})
            print(f"  {'ok  ' if rows[-1]['passed'] else 'FAIL'} {text!r} -> {got}", flush=True)
    return rows


def expected_text(name: str, domain: dict[str, Any], slots: dict[str, Any]) -> str:
    """The text a response gives (slots filled in), or ``re:<pattern>`` for a custom action."""
    if name.startswith("action:"):
        return "re:" + name.split(":", 2)[2]
    text = domain["responses"][name][0]["text"]
    return re.sub(r"{(\w+)}", lambda m: str(slots.get(m.group(1))), text)


def matches(got: str | None, wanted: str) -> bool:
    if wanted.startswith("re:"):
        return got is not None and re.search(wanted[3:], got) is not None
    return got == wanted


# --- main --------------------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", action="append", default=None,
                        help="a project folder (default: both examples)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="nlu_engine's DIET / ResponseSelector epochs (default: the config's)")
    parser.add_argument("--out", default=str(RESULTS / "rasa_dialogue_e2e.json"))
    args = parser.parse_args()
    if not (RASA_VENV / "bin" / "rasa").is_file():
        raise SystemExit(f"no Rasa at {RASA_VENV}; run ../shared/tools/rasa-reference setup or set RASA_VENV")
    names = args.project or ["examples/rasa_init", "examples/travel_assistant"]
    projects = [Path(p).resolve() for p in names]
    result: dict[str, Any] = {"rasa": str(RASA_VENV), "projects": {}}
    failed = False
    for project in projects:
        with tempfile.TemporaryDirectory(prefix="rasa-e2e-") as tmp:
            work = Path(tmp)
            models = train_models(project, work, args.epochs)
            cases = {"no token": (None, None), "token in endpoints.yml": (TOKEN, TOKEN),
                     "wrong token (control)": (TOKEN, "wrong")}
            outcome = {}
            for case, (server_token, client_token) in cases.items():
                print(f"{project.name}: {case}", flush=True)
                rows = run_case(project, work, models, server_token, client_token)
                outcome[case] = {"passed": sum(r["passed"] for r in rows), "turns": len(rows), "rows": rows}
                if "control" not in case and not all(r["passed"] for r in rows):
                    failed = True
            control = outcome["wrong token (control)"]
            control["bot_failed_as_expected"] = control["passed"] < control["turns"]
            result["projects"][project.name] = outcome
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    for name, outcome in result["projects"].items():
        print(name, {case: f"{o['passed']}/{o['turns']}" for case, o in outcome.items()})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
