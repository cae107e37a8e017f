"""Flags that several commands take are declared once (app/commands/common.py), with one default
and one check each; the command modules declare only their own flags."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pytest

from sparsescope.cli import COMMANDS, build_parser, main

COMMANDS_DIR = Path(__file__).resolve().parents[2] / "app" / "commands"

#: Where a shared flag's default differs, and why (the flag's help says it too).
DIFFERENT_DEFAULTS = {
    # serve: None, so that the SPARSESCOPE_* environment applies (the settings default the same)
    ("serve", "--device"),
    # --max-tokens: None everywhere (serve: SPARSESCOPE_MAX_TOKENS, else 512; the others: 512, or
    # the model's positions if fewer), so it is no exception
    ("clusters", "--limit"),  # 50 inputs: the POS shares settle long before a whole corpus
    ("pareto", "--block"),  # None: --block without --x block is an error
    ("fit", "--out"),  # an artefact's two named files: any folder (--artefact-dir)
    ("pareto", "--out"),  # four fixed names: a folder of its own
    ("adapt", "--out"),  # none: a training run names its folder (required to train)
    # adapt: a number or 'learned' (training: default 1.5) / 'own' (--evaluate: the model's own)
    ("adapt", "--alpha"),
    ("adapt", "--workers"),  # Ray Train workers: 2 (pareto: chosen by the inputs)
    ("adapt", "--threads"),  # torch's own count (pareto: 1 per worker process)
}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _flags(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.option_strings[-1]: a for a in p._actions if a.option_strings and a.dest != "help"}


def _declared(path: Path) -> set[str]:
    """Flags a module declares itself: ``*.add_argument("--flag", ...)`` calls."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).startswith("--")
        ):
            found.add(node.args[0].value)
    return found


def test_a_flag_of_several_commands_is_declared_in_common_only():
    by_flag: dict[str, list[str]] = {}
    for name in COMMANDS:
        for flag in _declared(COMMANDS_DIR / f"{name}.py"):
            by_flag.setdefault(flag, []).append(name)
    shared = {flag: names for flag, names in by_flag.items() if len(names) > 1}
    assert not shared, f"declare these in app/commands/common.py (add_<flag>): {shared}"


def test_a_flag_declared_in_common_is_declared_nowhere_else():
    """One declaration per shared flag, with no exception: a command that needs more of one
    (adapt's --alpha also takes 'learned' / 'own') asks its ``add_<flag>`` for it."""
    common = _declared(COMMANDS_DIR / "common.py")
    assert "--alpha" in common
    again = {
        name: sorted(_declared(COMMANDS_DIR / f"{name}.py") & common)
        for name in COMMANDS
        if _declared(COMMANDS_DIR / f"{name}.py") & common
    }
    assert not again, f"these commands declare a flag of common.py again: {again}"


def test_adapt_alpha_takes_its_words_through_the_shared_flag():
    adapt = _flags(_subparsers(build_parser())["adapt"])["--alpha"]
    assert adapt.default is None and adapt.type is str
    assert "learned" in adapt.help and "own" in adapt.help


def test_the_checker_sees_a_flag_declared_in_a_command(tmp_path):
    f = tmp_path / "cmd.py"
    f.write_text('def add_parser(sub):\n    sub.add_parser("x").add_argument("--alpha")\n')
    assert _declared(f) == {"--alpha"}


def test_shared_flags_have_one_default_and_one_help():
    subs = _subparsers(build_parser())
    seen: dict[str, dict[str, argparse.Action]] = {}
    for name, p in subs.items():
        for flag, action in _flags(p).items():
            seen.setdefault(flag, {})[name] = action
    shared = {flag: acts for flag, acts in seen.items() if len(acts) > 1}
    assert {"--alpha", "--artefact", "--device", "--max-tokens", "--model"} <= set(shared)
    for flag, acts in shared.items():
        usual = [a for cmd, a in acts.items() if (cmd, flag) not in DIFFERENT_DEFAULTS]
        assert len({repr(a.default) for a in usual}) <= 1, (flag, {a.default for a in usual})
    assert (
        len(
            {
                a.help
                for c, a in shared["--alpha"].items()
                if (c, "--alpha") not in DIFFERENT_DEFAULTS
            }
        )
        == 1
    )
    assert len({a.help for a in shared["--artefact"].values()}) == 1
    for cmd, flag in DIFFERENT_DEFAULTS:  # each exception is real, and its help says why
        action = seen[flag][cmd]
        others = {repr(a.default) for c, a in seen[flag].items() if c != cmd}
        assert repr(action.default) not in others, (cmd, flag)
        assert "default" in action.help, (cmd, flag)


@pytest.mark.parametrize("command", ["analyze", "fit", "pareto", "clusters"])
def test_a_bad_alpha_is_one_message_before_any_loading(command, capsys, tmp_path):
    """Every command checks --alpha first, with the engine's one message (no model loads: the
    model directory does not even exist)."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("The chef ran.\n")
    argv = {
        "analyze": ["analyze", "hi"],
        "fit": ["fit", "--corpus", str(corpus)],
        "pareto": ["pareto", "--corpus", str(corpus)],
        "clusters": ["clusters", "--corpus", str(corpus), "--layer", "0", "--head", "0"],
    }[command]
    code = main([*argv, "--alpha", "2.5", "--model", str(tmp_path / "missing")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "alpha must be in [1, 2] (1 softmax, 1.5 entmax, 2 sparsemax), got 2.5" in err


@pytest.mark.real_model
def test_analyze_takes_max_tokens_up_to_the_models_positions(capsys):
    """``analyze --max-tokens``: a cap below the model's positions refuses a longer text saying
    how to raise it, --truncate cuts to it; above the positions (512 for MiniLM) is refused
    naming the range."""
    text = "word " * 100  # 102 tokens with the specials
    assert main(["analyze", text, "--max-tokens", "64", "--method", "window"]) == 2
    err = capsys.readouterr().err
    assert "at most 64" in err and "--max-tokens" in err and "512 positions" in err
    args = ["analyze", text, "--max-tokens", "64", "--truncate", "--method", "window", "--json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 64
    assert main(["analyze", "a text", "--max-tokens", "9000"]) == 2
    assert "--max-tokens must be in [8, 512]" in capsys.readouterr().err


def test_pareto_workers_started_ahead_leave_one_message_for_a_missing_model(capfd, tmp_path):
    """``pareto --workers 2`` starts its worker before loading its own model; a model path that
    does not exist is still the command's one line, not also the worker's traceback (a child
    process writes to the real stderr: capfd sees it)."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("The chef ran to the store.\n")
    argv = ["pareto", "--corpus", str(corpus), "--workers", "2", "--out", str(tmp_path / "o")]
    code = main([*argv, "--model", str(tmp_path / "missing")])
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert err.strip().splitlines() == [
        f"sparsescope pareto: error: model directory '{tmp_path / 'missing'}' does not exist"
    ]
