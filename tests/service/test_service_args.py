"""`ProjectScope`: the one reading of a request's `project`, shared by every surface."""

from __future__ import annotations

import pytest

from nmem.errors import InvalidArgument
from nmem.service.args import ProjectScope

pytestmark = pytest.mark.no_store  # reads arguments; opens no store


@pytest.mark.parametrize(("value", "bound", "only", "first"), [
    (None, False, None, "here"),      # a search: every project, the current one first
    (None, True, "here", None),       # recall, recent, trace, sessions: the current project
    ("*", False, None, None), ("*", True, None, None), ("", False, None, None), ("  ", True, None, None),
    (".", False, "here", None), (".", True, "here", None),
    ("web", False, "web", None), (" web ", True, "web", None),
])
def test_a_project_argument_reads_the_same_everywhere(value: str | None, bound: bool, only: str | None,
                                                      first: str | None) -> None:
    scope = ProjectScope.parse(value, "here", bound=bound)
    assert (scope.only, scope.first) == (only, first)



def test_without_a_current_project_a_missing_one_means_every_project() -> None:
    assert (ProjectScope.parse(None, None).only, ProjectScope.parse(None, None, bound=True).only) == (None, None)


def test_a_project_must_be_text() -> None:
    with pytest.raises(InvalidArgument, match="project must be a name"):
        ProjectScope.parse(3, "here")
