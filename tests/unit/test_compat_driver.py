"""The version matrix's driver (captcha_tasks_dev.compat): its pure parts, no venvs."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from captcha_tasks_dev import compat
from captcha_tasks_dev.compat import (
    ROWS,
    SELECTED_TESTS,
    Row,
    RowResult,
    declared_ranges_match,
    parse_junit,
    render_table,
    replace_between_markers,
    select_rows,
)

SAMPLE_ROWS = (
    Row("py3.10-celery5.5", "3.10", "5.5.3", "5.5.4", "5.2.1"),
    Row("py3.13-celery5.5", "3.13", "5.5.3", "5.5.4", "5.2.1"),
    Row("py3.10-celery5.6-kombu5.7", "3.10", "5.6.3", "5.7.0", "8.2.0"),
    Row("py3.12-celery5.6-kombu5.6", "3.12", "5.6.3", "5.6.2", "6.4.0"),
)


def labels(rows: list[Row]) -> list[str]:
    return [row.label for row in rows]


def test_no_pattern_selects_every_row() -> None:
    assert select_rows(SAMPLE_ROWS, None) == list(SAMPLE_ROWS)
    assert select_rows(SAMPLE_ROWS, "") == list(SAMPLE_ROWS)


def test_a_word_matches_anywhere_in_the_label() -> None:
    assert labels(select_rows(SAMPLE_ROWS, "5.5")) == ["py3.10-celery5.5", "py3.13-celery5.5"]
    assert labels(select_rows(SAMPLE_ROWS, "kombu5.6")) == ["py3.12-celery5.6-kombu5.6"]


def test_a_glob_matches_the_whole_label_and_patterns_combine() -> None:
    assert labels(select_rows(SAMPLE_ROWS, "py3.1[03]-celery5.5")) == [
        "py3.10-celery5.5",
        "py3.13-celery5.5",
    ]
    # A glob is anchored: "celery5.6*" matches no label, which all start with "py".
    assert select_rows(SAMPLE_ROWS, "celery5.6*") == []
    assert labels(select_rows(SAMPLE_ROWS, "py3.13*, kombu5.7")) == [
        "py3.13-celery5.5",
        "py3.10-celery5.6-kombu5.7",
    ]


def test_rows_are_unique_exact_pins_on_known_interpreters() -> None:
    assert len({row.label for row in ROWS}) == len(ROWS)
    for row in ROWS:
        assert row.python in compat.DEFAULT_INTERPRETERS, row
        assert all(pin.count("==") == 1 for pin in row.pins()), row
    assert len(set(SELECTED_TESTS)) == len(SELECTED_TESTS)


def test_missing_test_files_are_set_apart(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_here.py").write_text("")
    present, missing = compat.present_tests(tmp_path, ["tests/test_here.py", "tests/test_gone.py"])
    assert present == ["tests/test_here.py"]
    assert missing == ["tests/test_gone.py"]


def result(label: str, **kw: object) -> RowResult:
    base = RowResult(
        label=label,
        pins={"python": "3.10", "celery": "5.5.3", "kombu": "5.5.4", "redis": "5.2.1"},
        installed={"python": "3.10.13", "celery": "5.5.3", "kombu": "5.5.4", "redis": "5.2.1"},
    )
    for key, value in kw.items():
        setattr(base, key, value)
    return base


def test_the_table_has_a_line_per_row_with_counts_wall_and_outcome() -> None:
    green = result("a", passed=40, test_seconds=125.4, green=True)
    red = result(
        "b",
        passed=12,
        failed=3,
        errors=1,
        test_seconds=42,
        first_failure="tests/integration/test_aio.py::test_x",
        failure_line="AttributeError: 'Channel' object has no attribute '_expires'",
        installed={},
    )
    lines = render_table([green, red]).splitlines()
    assert lines[0] == (
        "| row | Python | Celery | kombu | redis-py | passed | failed | wall | result |"
    )
    assert lines[2] == "| pins | 3.10.13 | 5.5.3 | 5.5.4 | 5.2.1 | 40 | 0 | 2m05s | green |"
    # A row that installed nothing shows its pins; failures and errors count together.
    assert lines[3] == (
        "| pins | 3.10 | 5.5.3 | 5.5.4 | 5.2.1 | 12 | 4 | 42s | red: "
        "`tests/integration/test_aio.py::test_x` "
        "(AttributeError: 'Channel' object has no attribute '_expires') |"
    )
    assert len(lines) == 4


def test_the_newest_and_oldest_rows_are_named_and_show_what_they_installed() -> None:
    newest = result(
        "py3.13-newest",
        resolution="newest",
        installed={"python": "3.13.0", "celery": "5.7.0", "kombu": "5.7.0", "redis": "8.2.0"},
        passed=3,
        green=True,
    )
    line = render_table([newest]).splitlines()[2]
    assert line == "| newest | 3.13.0 | 5.7.0 | 5.7.0 | 8.2.0 | 3 | 0 | 0s | green |"


def test_a_pipe_in_a_failure_does_not_split_the_cell() -> None:
    red = result("c", first_failure="install", failure_line="pip: a | b")
    line = render_table([red]).splitlines()[2]
    assert line.endswith("red: `install` (pip: a \\| b) |")


def test_the_table_replaces_what_lies_between_the_markers() -> None:
    page = f"# Title\n\nbefore\n{compat.TABLE_START}\nold table\n{compat.TABLE_END}\nafter\n"
    out = replace_between_markers(page, "| new |\n")
    assert (
        out == f"# Title\n\nbefore\n{compat.TABLE_START}\n\n| new |\n\n{compat.TABLE_END}\nafter\n"
    )
    # Idempotent: writing the same table twice leaves the page as it was.
    assert replace_between_markers(out, "| new |\n") == out
    with pytest.raises(ValueError, match="markers"):
        replace_between_markers("# no markers\n", "| new |\n")


def test_junit_counts_and_the_first_failure(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("")
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<?xml version="1.0"?><testsuites>'
        '<testsuite tests="4" failures="1" errors="1" skipped="1">'
        '<testcase classname="tests.test_a" name="test_ok" time="1.5"/>'
        '<testcase classname="tests.test_a" name="test_bad" time="2.0">'
        '<failure message="AttributeError: no _expires&#10;second line">tb</failure></testcase>'
        '<testcase classname="tests.test_a.TestK" name="test_err" time="0.5">'
        '<error message="fixture broke">tb</error></testcase>'
        '<testcase classname="tests.test_a" name="test_skip" time="0"><skipped/></testcase>'
        "</testsuite></testsuites>"
    )
    parsed = parse_junit(junit, tmp_path)
    assert (parsed["passed"], parsed["failed"], parsed["errors"], parsed["skipped"]) == (1, 1, 1, 1)
    assert parsed["first_failure"] == "tests/test_a.py::test_bad"
    assert parsed["failure_line"] == "AttributeError: no _expires"
    assert parsed["file_seconds"] == {"tests/test_a.py": 4.0}


def test_a_module_that_fails_to_import_is_named_with_its_exception(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_b.py").write_text("")
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<?xml version="1.0"?><testsuites><testsuite tests="1" errors="1">'
        '<testcase classname="" name="tests.test_b" time="0.000">'
        '<error message="collection failure">ImportError while importing test module\n'
        "Traceback:\nE   ImportError: cannot import name 'Self' from 'typing'\n</error>"
        "</testcase></testsuite></testsuites>"
    )
    parsed = parse_junit(junit, tmp_path)
    assert (parsed["passed"], parsed["errors"]) == (0, 1)
    assert parsed["first_failure"] == "tests/test_b.py"
    assert parsed["failure_line"] == "ImportError: cannot import name 'Self' from 'typing'"


PYPROJECT = """
[project]
name = "x"
dependencies = [
    "celery[redis]{celery}",
    "redis{redis}",
    {kombu}
    "click>=8",
]
"""


def pyproject(tmp_path: Path, celery: str, redis: str, kombu: str | None) -> Path:
    path = tmp_path / "pyproject.toml"
    kombu_line = f'"kombu{kombu}",' if kombu is not None else ""
    path.write_text(PYPROJECT.format(celery=celery, redis=redis, kombu=kombu_line))
    return path


def test_ranges_that_are_the_tested_lines_match(tmp_path: Path) -> None:
    path = pyproject(tmp_path, ">=5.5,<5.7", ">=5.2,<8.3", ">=5.5,<5.8")
    check = declared_ranges_match(SAMPLE_ROWS, path)
    assert check.problems == []
    assert check
    assert check.suggested == {"celery": ">=5.5,<5.7", "kombu": ">=5.5,<5.8", "redis": ">=5.2,<8.3"}


def test_ranges_wider_or_narrower_than_the_tested_lines_are_named(tmp_path: Path) -> None:
    # celery admits 5.7 (untested), redis excludes the tested 8.2.0 and admits 5.1,
    # kombu is not declared at all.
    path = pyproject(tmp_path, ">=5.5,!=5.7.0,<6", ">=5.0,<8", None)
    check = declared_ranges_match(SAMPLE_ROWS, path)
    assert not check
    assert check.problems == [
        "celery: !=5.7.0,<6,>=5.5 admits 5.7.1, past the tested lines",
        "kombu: pyproject.toml declares no range (tested: >=5.5,<5.8)",
        "redis: <8,>=5.0 excludes the tested 8.2.0",
        "redis: <8,>=5.0 admits 5.1.999, below the tested lines",
    ]


def test_the_projects_own_ranges_are_exactly_the_tested_lines() -> None:
    check = declared_ranges_match(ROWS)
    assert check.problems == [], check.suggested
    assert set(check.suggested) == {"celery", "kombu", "redis"}
    # The pinned rows' lines are what the newest and oldest rows find at the ends of the
    # ranges: the oldest row's floors are the lowest pins.
    floors = dict(line.split("==") for line in compat.floor_constraints())
    pinned = [row for row in ROWS if row.resolution == "pinned"]
    for name in ("celery", "kombu", "redis"):
        assert Version(floors[name]) == min(Version(getattr(row, name)) for row in pinned), name


def test_every_range_is_tested_at_both_ends() -> None:
    kinds = [row.resolution for row in ROWS]
    assert kinds.count("newest") == kinds.count("oldest") == 1
    newest, oldest = (next(r for r in ROWS if r.resolution == k) for k in ("newest", "oldest"))
    pythons = sorted(compat.DEFAULT_INTERPRETERS, key=Version)
    # The oldest dependencies on the oldest Python, the newest on the newest.
    assert (oldest.python, newest.python) == (pythons[0], pythons[-1])
    for row in (newest, oldest):
        assert set(row.extras()) == {"compat", *compat.USER_EXTRAS}
        for extra in compat.USER_EXTRAS:
            assert set(compat.EXTRA_TESTS[extra]) <= set(row.tests()), extra
    # Every test file named exists.
    _, missing = compat.present_tests(compat.ROOT, newest.tests())
    assert missing == []


PYPROJECT_EXTRAS = """
[project]
name = "x"
dependencies = ["celery[redis]>=5.5.3,<5.8", "requests[socks]>=2.31,<3", "idna"]

[project.optional-dependencies]
mcp = ["mcp>=1.22,<2"]
scrapy = ["scrapy~=2.14"]
dev = ["captcha_tasks[mcp]", "pytest>=8"]
shiny = ["x>=1"]
"""


def test_the_oldest_row_pins_each_declared_floor(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(PYPROJECT_EXTRAS.replace(', "idna"', ""))
    assert compat.floor_constraints(path) == [
        "celery==5.5.3",
        "requests==2.31",
        "mcp==1.22",
        "scrapy==2.14",
    ]
    path.write_text(PYPROJECT_EXTRAS)
    with pytest.raises(ValueError, match="idna"):
        compat.floor_constraints(path)


def test_a_requirement_without_a_floor_and_an_unknown_extra_are_named(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(PYPROJECT_EXTRAS)
    problems = declared_ranges_match(SAMPLE_ROWS, path).problems
    assert problems[:2] == [
        "[shiny]: neither a user-facing nor a tooling extra of compat.py",
        "idna (runtime): no floor for the oldest row to pin",
    ]


def test_the_ranges_table_shows_each_requirement_at_both_ends(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(PYPROJECT_EXTRAS.replace(', "idna"', ""))
    oldest = result("o", resolution="oldest", installed={"celery": "5.5.3", "mcp": "1.22.0"})
    lines = compat.render_ranges([oldest], path).splitlines()
    assert lines[2] == "| celery | runtime | <5.8,>=5.5.3 | 5.5.3 | not run |"
    assert lines[4] == "| mcp | [mcp] | <2,>=1.22 | 1.22.0 | not run |"
    assert lines[-1] == "| pydantic | mcp's | (not declared) | - | not run |"
