"""Memory sync over a plain git remote (docs/sync.md).

`oplog` (the operation lines and the hybrid logical clock) and `lock` are light: the store
and the hooks use them. `engine` (fetch, apply, push) and `git` load only when a sync runs.
"""
