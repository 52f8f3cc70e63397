"""The chaos hunt script (``tests/hunt_chaos.py``): it draws, replays what it wrote, and
refuses unclear arguments."""

from __future__ import annotations

from pathlib import Path

import pytest
from chaos_scenarios import EVERY_HOLDER_DIED
from hunt_chaos import main


def test_a_replay_runs_each_scenario_in_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "found.txt"
    saved.write_text(f"{EVERY_HOLDER_DIED!r}\n#what failed once\n")
    assert main(["--replay", str(saved)]) == 0
    assert "0 of 1 failed" in capsys.readouterr().out


def test_a_draw_runs_as_many_scenarios_as_asked(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--seed", "1", "--count", "2"])
    assert " of 2 failed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args", [[], ["--seed", "1", "--replay", "x"], ["--seed", "1", "--count", "0"]]
)
def test_unclear_arguments_are_refused(args: list[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(args)
    assert refused.value.code == 2
