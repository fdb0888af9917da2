"""Model folders are searched a bounded number of levels down, never the whole disk."""

from __future__ import annotations

from pathlib import Path

from nlu_engine.contract.paths import MAX_SEARCH_DEPTH, shallowest_folder


def marked(folder: Path) -> bool:
    return (folder / "model.cfg").is_file()


def test_the_shallowest_match_wins_and_ties_go_by_name(tmp_path: Path) -> None:
    for name in ("b/deep", "a", "c"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "b" / "deep" / "model.cfg").write_text("")
    assert shallowest_folder(tmp_path, marked) == tmp_path / "b" / "deep"
    (tmp_path / "c" / "model.cfg").write_text("")
    (tmp_path / "a" / "model.cfg").write_text("")
    assert shallowest_folder(tmp_path, marked) == tmp_path / "a"
    (tmp_path / "model.cfg").write_text("")
    assert shallowest_folder(tmp_path, marked) == tmp_path


def test_nothing_below_the_depth_limit_or_behind_a_link_is_found(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*["d"] * (MAX_SEARCH_DEPTH + 1))
    deep.mkdir(parents=True)
    (deep / "model.cfg").write_text("")
    assert shallowest_folder(tmp_path, marked) is None
    assert shallowest_folder(tmp_path, marked, max_depth=MAX_SEARCH_DEPTH + 1) == deep
    (tmp_path / "link").symlink_to(deep)
    assert shallowest_folder(tmp_path, marked) is None
    assert shallowest_folder(tmp_path / "missing", marked) is None
