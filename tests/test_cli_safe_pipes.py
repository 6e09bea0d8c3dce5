"""Safe pipes: what `search --ids` prints and what purge deletes match strictly (every word)."""

from __future__ import annotations

from nmem.memory import Service
from test_cli_support import bash, ok

T0 = 1_790_000_000


def twenty_tests(service: Service) -> dict[str, int]:
    """Twenty test runs sharing the word "test"; only one is test_3."""
    return {f"test_{i}": bash(service, f"pytest tests/test_{i}.py -q", T0 + i) for i in range(1, 21)}


def test_readme_pipe_purges_only_the_row_that_matches(service: Service) -> None:
    runs = twenty_tests(service)
    ids = ok("search", "test_3", "--ids").stdout.split()
    assert ids == [str(runs["test_3"])]
    for ref in ids:  # what `xargs -I{} nmem purge --id {} --confirm` runs, one id at a time
        ok("purge", "--id", ref, "--confirm")
    left = {o.id for o in service.get_observations(list(runs.values()))}
    assert left == set(runs.values()) - {runs["test_3"]}
