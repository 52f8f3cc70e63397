"""``overlay testnet demo``: the README's main command must pass, and say what it did."""

from __future__ import annotations

import pytest

from testnet.demo import DemoOptions, run_demo
from tools import cli


@pytest.mark.slow
def test_demo_command_exits_0_and_explains_itself(capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.main(
        [
            "testnet",
            "demo",
            "--nodes",
            "24",
            "--subscribers",
            "4",
            "--packets",
            "90",
            "--rate",
            "200",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0, out
    for step in ("[1/5]", "[2/5]", "[3/5]", "[4/5]", "[5/5]"):
        assert step in out
    assert "killed the root" in out and "repaired: new root node" in out
    assert out.count("lost 0, duplicates 0, out of order 0  [ok]") == 4
    assert "one root, no cycles" in out  # whole (a far root is a warning)
    assert "DEMO PASSED" in out


async def test_demo_reports_failure_when_a_check_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A subscriber that lost packets makes the demo fail (exit 1), naming it."""
    import testnet.demo as demo

    real_report = demo.report

    def lossy(publisher, recorders, kills):  # type: ignore[no-untyped-def]
        recorders[0].numbers[:] = recorders[0].numbers[1:]
        return real_report(publisher, recorders, kills)

    monkeypatch.setattr(demo, "report", lossy)
    lines: list[str] = []
    ok = await run_demo(
        DemoOptions(nodes=12, subscribers=2, packets=30, rate=300, kill_at=10), lines.append
    )
    assert not ok
    assert any("DEMO FAILED" in line for line in lines)
    assert any("lost 1" in line for line in lines)


def test_demo_bad_options_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["testnet", "demo", "--nodes", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--nodes >= 4" in err
