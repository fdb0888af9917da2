"""``serve --workers 2``: ``PUT /model`` reaches every worker through the swap file; a broken
archive is refused in the worker that receives it and changes nothing anywhere."""

from __future__ import annotations

import time
from pathlib import Path

from nlu_engine.assembly.model import train
from nlu_engine.server.process import ServerProcess
from nlu_engine.server.swaps import announce, announced
from tests.extras import requires_extra

ROOT = Path(__file__).resolve().parents[2]
WORD_ONLY = {"language": "en", "pipeline": [{"name": "WhitespaceTokenizer"},
                                            {"name": "CountVectorsFeaturizer"},
                                            {"name": "LogisticRegressionClassifier"}]}


def test_the_swap_file_names_the_newest_archive(tmp_path: Path) -> None:
    swap = tmp_path / "swap.json"
    assert announced(swap) is None
    announce(swap, tmp_path / "a.tar.gz")
    announce(swap, tmp_path / "b.tar.gz")
    assert announced(swap) == tmp_path / "b.tar.gz"
    assert [p.name for p in tmp_path.iterdir()] == ["swap.json"]  # no temporary file left
    swap.write_text("{not json")
    assert announced(swap) is None


@requires_extra("server")
def test_a_swap_reaches_every_worker(tmp_path: Path, tiny_data_path: Path) -> None:
    import httpx

    train(ROOT / "nlu_engine" / "pipelines" / "logreg.yml", tiny_data_path, out=tmp_path,
          fixed_model_name="a", log=None)
    train(WORD_ONLY, tiny_data_path, out=tmp_path, fixed_model_name="b", log=None)
    (tmp_path / "broken.tar.gz").write_bytes(b"not a gzip archive")
    with ServerProcess(["-m", str(tmp_path / "a.tar.gz"), "--workers", "2"], ready_path="/status") as server:
        url = server.url

        def models_answering() -> dict[str, str]:
            """worker id -> its model, over fresh connections (a kept one sticks to one worker)."""
            found: dict[str, str] = {}
            for _ in range(20):
                status = httpx.get(url + "/status", headers={"Connection": "close"}, timeout=30).json()
                found[status["worker_id"]] = status["model_file"]
            return found

        assert set(models_answering().values()) == {"a.tar.gz"}
        broken = httpx.put(url + "/model", json={"model_file": "broken.tar.gz"}, timeout=60)
        assert broken.status_code == 400 and "could not load the model" in broken.json()["message"]
        assert httpx.put(url + "/model", json={"model_file": "b.tar.gz"}, timeout=60).status_code == 204
        for _ in range(60):  # the other worker follows within about a second
            answering = models_answering()
            if len(answering) == 2 and set(answering.values()) == {"b.tar.gz"}:
                break
            time.sleep(0.5)
        assert len(answering) == 2 and set(answering.values()) == {"b.tar.gz"}, answering
        assert httpx.delete(url + "/model", timeout=30).status_code == 409
        assert "Traceback" not in server.log()
