"""`key_line`: the informative slice of a failed command's output, over outputs in the shapes real
tools print them (test runners, compilers, linters, package managers, git, make, shells)."""

from __future__ import annotations

import pytest

from nmem.capture.errorline import KEY_CHARS, key_line

PYTEST = """\
============================= test session starts ==============================
platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0
rootdir: /home/dev/code/billing-api
collected 3 items

tests/test_invoice.py .F.                                                [100%]

=================================== FAILURES ===================================
_______________________________ test_total_rounds ______________________________

    def test_total_rounds():
>       assert total([Decimal("10.005")]) == Decimal("10.01")
E       AssertionError: assert Decimal('10.00') == Decimal('10.01')
E        +  where Decimal('10.00') = total([Decimal('10.005')])

tests/test_invoice.py:12: AssertionError
=========================== short test summary info ============================
FAILED tests/test_invoice.py::test_total_rounds - AssertionError: assert Decimal('10.00') == Decimal('10.01')
========================= 1 failed, 2 passed in 0.12s ==========================
"""

PYTEST_COLLECTION = """\
==================================== ERRORS ====================================
____________________ ERROR collecting tests/test_export.py _____________________
ImportError while importing test module '/home/dev/code/billing-api/tests/test_export.py'.
Traceback:
/usr/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
tests/test_export.py:3: in <module>
    import openpyxl
E   ModuleNotFoundError: No module named 'openpyxl'
=========================== short test summary info ============================
ERROR tests/test_export.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
1 error in 0.21s
"""

PYTEST_PLAIN_ASSERT = """\
    def test_total():
>       assert add(1, 2) == 4
E       assert 3 == 4
E        +  where 3 = add(1, 2)

tests/test_calc.py:8: AssertionError
"""

PYTEST_QUIET = """\
..F.
FAILED tests/test_auth.py::test_login_org_account - KeyError: 'org_id'
1 failed, 3 passed in 0.40s
"""

UNITTEST = """\
F.
======================================================================
FAIL: test_add (test_calc.TestCalc.test_add)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/home/dev/calc/test_calc.py", line 6, in test_add
    self.assertEqual(add(1, 2), 4)
AssertionError: 3 != 4

----------------------------------------------------------------------
Ran 2 tests in 0.001s

FAILED (failures=1)
"""

JEST = """\
FAIL src/sum.test.js
  sum
    ✓ adds 2 + 2 (2 ms)
    ✕ adds 1 + 2 to equal 3 (3 ms)

  ● sum › adds 1 + 2 to equal 3

    expect(received).toBe(expected) // Object.is equality

    Expected: 3
    Received: 4

      3 | test('adds 1 + 2 to equal 3', () => {
    > 4 |   expect(sum(1, 2)).toBe(3);
        |                     ^

      at Object.toBe (src/sum.test.js:4:21)

Test Suites: 1 failed, 1 total
Tests:       1 failed, 3 passed, 4 total
Snapshots:   0 total
Time:        0.512 s
Ran all test suites.
"""

VITEST = """\
 FAIL  src/cart.test.ts > cart > applies the discount
AssertionError: expected 90 to be 81 // Object.is equality
 ❯ src/cart.test.ts:9:28

 Test Files  1 failed (1)
      Tests  1 failed | 5 passed (6)
   Start at  10:12:01
   Duration  312ms
"""

MOCHA = """\
  Array
    #indexOf()
      ✔ should return the index when present
      1) should return -1 when the value is not present


  1 passing (9ms)
  1 failing

  1) Array
       #indexOf()
         should return -1 when the value is not present:

      AssertionError [ERR_ASSERTION]: 0 == -1
      + expected - actual

      -0
      +-1

      at Context.<anonymous> (test/array.spec.js:9:14)
"""

GO_TEST = """\
--- FAIL: TestAdd (0.00s)
    add_test.go:9: Add(1, 2) = 4; want 3
FAIL
FAIL\texample.com/calc\t0.002s
FAIL
"""

GO_BUILD = """\
# example.com/calc
./calc.go:5:2: undefined: fmt.Printl
FAIL\texample.com/calc [build failed]
FAIL
"""

CARGO_BUILD = """\
   Compiling invoice v0.1.0 (/home/dev/code/invoice)
error[E0308]: mismatched types
 --> src/main.rs:4:18
  |
4 |     let total: i32 = "10";
  |                ---   ^^^^ expected `i32`, found `&str`
  |                |
  |                expected due to this

For more information about this error, try `rustc --explain E0308`.
error: could not compile `invoice` (bin "invoice") due to 1 previous error
"""

CARGO_TEST = """\
running 2 tests
test tests::adds ... ok
test tests::rounds ... FAILED

failures:

---- tests::rounds stdout ----
thread 'tests::rounds' panicked at src/lib.rs:10:9:
assertion `left == right` failed
  left: 1000
 right: 1001
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    tests::rounds

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

error: test failed, to rerun pass `--lib`
"""

JEST_TWO = """\
FAIL src/cart.test.js
  cart
    ✓ sums (2 ms)
    ✕ applies the discount (3 ms)
    ✕ rejects negative quantities (1 ms)

  ● cart › applies the discount

    expect(received).toEqual(expected) // deep equality

    Expected: 81
    Received: 90

       7 |   const cart = makeCart([{ price: 100, qty: 1 }]);
    >  8 |   expect(cart.total({ discount: 0.1 })).toEqual(81);
         |                                         ^

      at Object.toEqual (src/cart.test.js:8:41)

  ● cart › rejects negative quantities

    TypeError: Cannot read properties of undefined (reading 'qty')

      at qty (src/cart.js:4:20)

Test Suites: 1 failed, 2 passed, 3 total
Tests:       2 failed, 14 passed, 16 total
Snapshots:   0 total
Time:        1.204 s
Ran all test suites.
"""

VITEST_TWO = """\
 ❯ src/cart.test.ts (6 tests | 2 failed) 9ms
   × cart > applies the discount 4ms
     → expected 90 to be 81 // Object.is equality
   × cart > rounds the total 1ms
     → expected 10 to be 10.01 // Object.is equality

⎯⎯⎯⎯⎯⎯⎯ Failed Tests 2 ⎯⎯⎯⎯⎯⎯⎯

 FAIL  src/cart.test.ts > cart > applies the discount
AssertionError: expected 90 to be 81 // Object.is equality

- Expected
+ Received

- 81
+ 90

 ❯ src/cart.test.ts:9:28

⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯[1/2]⎯

 FAIL  src/cart.test.ts > cart > rounds the total
AssertionError: expected 10 to be 10.01 // Object.is equality
 ❯ src/cart.test.ts:14:30

⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯[2/2]⎯

 Test Files  1 failed (1)
      Tests  2 failed | 4 passed (6)
   Start at  10:12:01
   Duration  318ms
"""

# `npm test` running `node --test` (Node 20, output not a terminal: the TAP reporter)
NODE_TAP = """\

> web@1.0.0 test
> node --test

TAP version 13
# Subtest: math
    # Subtest: adds
    ok 1 - adds
      ---
      duration_ms: 1.442596
      ...
    # Subtest: subtracts
    not ok 2 - subtracts
      ---
      duration_ms: 18.308311
      location: '/home/dev/web/test/math.test.js:6:3'
      failureType: 'testCodeFailure'
      error: |-
        Expected values to be strictly equal:
       \x20
        2 !== 1
       \x20
      code: 'ERR_ASSERTION'
      name: 'AssertionError'
      expected: 1
      actual: 2
      operator: 'strictEqual'
      stack: |-
        TestContext.<anonymous> (/home/dev/web/test/math.test.js:6:34)
        Test.runInAsyncScope (node:async_hooks:206:9)
      ...
    # Subtest: multiplies
    not ok 3 - multiplies
      ---
      duration_ms: 27.015527
      location: '/home/dev/web/test/math.test.js:7:3'
      failureType: 'testCodeFailure'
      error: |-
        Expected values to be strictly deep-equal:
        + actual - expected
       \x20
          {
        +   a: 4
        -   a: 5
          }
      code: 'ERR_ASSERTION'
      name: 'AssertionError'
      stack: |-
        TestContext.<anonymous> (/home/dev/web/test/math.test.js:7:35)
      ...
    1..3
not ok 1 - math
  ---
  duration_ms: 65.37102
  type: 'suite'
  location: '/home/dev/web/test/math.test.js:4:1'
  failureType: 'subtestsFailed'
  error: '2 subtests failed'
  code: 'ERR_TEST_FAILURE'
  ...
# Subtest: parses config
not ok 2 - parses config
  ---
  duration_ms: 0.29363
  location: '/home/dev/web/test/math.test.js:9:1'
  failureType: 'testCodeFailure'
  error: "Expected property name or '}' in JSON at position 1"
  code: 'ERR_TEST_FAILURE'
  name: 'SyntaxError'
  stack: |-
    JSON.parse (<anonymous>)
  ...
1..2
# tests 4
# suites 1
# pass 1
# fail 3
# cancelled 0
# skipped 0
# todo 0
# duration_ms 1342.506377
"""

NODE_TAP_QUOTED = """\
TAP version 13
# Subtest: parses config
not ok 1 - parses config
  ---
  duration_ms: 0.29363
  location: '/home/dev/web/test/config.test.js:9:1'
  failureType: 'testCodeFailure'
  error: "Expected property name or '}' in JSON at position 1"
  code: 'ERR_TEST_FAILURE'
  name: 'SyntaxError'
  ...
1..1
# tests 1
# suites 0
# pass 0
# fail 1
# cancelled 0
# skipped 0
# todo 0
# duration_ms 40.1
"""

# `node --test --test-reporter=spec` (the default on a terminal)
NODE_SPEC = """\
▶ math
  ✔ adds (21.704058ms)
  ✖ subtracts (1.859126ms)
    AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:
   \x20
    2 !== 1
   \x20
        at TestContext.<anonymous> (/home/dev/web/test/math.test.js:6:34) {
      generatedMessage: true,
      code: 'ERR_ASSERTION',
      actual: 2,
      expected: 1,
      operator: 'strictEqual'
    }

  ✖ multiplies (19.079597ms)
    AssertionError [ERR_ASSERTION]: Expected values to be strictly deep-equal:
        at TestContext.<anonymous> (/home/dev/web/test/math.test.js:7:35)

✖ math (44.663119ms)
✖ parses config (0.250991ms)
  SyntaxError [Error]: Expected property name or '}' in JSON at position 1
      at JSON.parse (<anonymous>)

ℹ tests 4
ℹ suites 1
ℹ pass 1
ℹ fail 3
ℹ cancelled 0
ℹ skipped 0
ℹ todo 0
ℹ duration_ms 972.171651

✖ failing tests:

test at test/math.test.js:6:3
✖ subtracts (1.859126ms)
  AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:
 \x20
  2 !== 1
 \x20
      at TestContext.<anonymous> (/home/dev/web/test/math.test.js:6:34) {
    generatedMessage: true,
    code: 'ERR_ASSERTION',
    actual: 2,
    expected: 1,
    operator: 'strictEqual'
  }

test at test/math.test.js:7:3
✖ multiplies (19.079597ms)
  AssertionError [ERR_ASSERTION]: Expected values to be strictly deep-equal:
      at TestContext.<anonymous> (/home/dev/web/test/math.test.js:7:35)

test at test/math.test.js:9:1
✖ parses config (0.250991ms)
  SyntaxError [Error]: Expected property name or '}' in JSON at position 1
      at JSON.parse (<anonymous>)
"""

GO_SUBTESTS = """\
--- FAIL: TestParse (0.00s)
    --- FAIL: TestParse/empty (0.00s)
        parse_test.go:14: Parse("") error = nil, want error
    --- FAIL: TestParse/spaces (0.00s)
        parse_test.go:14: Parse(" 1 ") = 0, want 1
--- FAIL: TestAdd (0.00s)
    add_test.go:9: Add(1, 2) = 4; want 3
FAIL
FAIL\texample.com/calc\t0.003s
FAIL
"""

# cargo test (Rust 1.9x: the panic names the thread's id; RUST_BACKTRACE=1)
CARGO_TEST_THREE = """\
   Compiling calc v0.1.0 (/home/dev/calc)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 2.82s
     Running unittests src/lib.rs (target/debug/deps/calc-c6626fb655a8d231)

running 4 tests
test tests::neg ... ok
test tests::adds ... FAILED
test tests::zero ... FAILED
test tests::parses ... FAILED

failures:

---- tests::adds stdout ----

thread 'tests::adds' (30984) panicked at src/lib.rs:5:25:
assertion `left == right` failed
  left: 4
 right: 3
stack backtrace:
   0: __rustc::rust_begin_unwind
             at /rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/std/src/panicking.rs:689:5
   4: calc::tests::adds
             at ./src/lib.rs:5:25
note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.

---- tests::zero stdout ----

thread 'tests::zero' (31019) panicked at src/lib.rs:6:25:
assertion `left == right` failed: zero stays zero
  left: 1
 right: 0

---- tests::parses stdout ----

thread 'tests::parses' (30986) panicked at src/lib.rs:8:52:
called `Result::unwrap()` on an `Err` value: ParseIntError { kind: InvalidDigit }


failures:
    tests::adds
    tests::parses
    tests::zero

test result: FAILED. 1 passed; 3 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.56s

error: test failed, to rerun pass `--lib`
"""

TSC = """\
src/index.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.
src/index.ts(9,1): error TS2304: Cannot find name 'foo'.
"""

TSC_PRETTY = """\
src/index.ts:3:7 - error TS2322: Type 'string' is not assignable to type 'number'.

3 const n: number = "x";
        ~

Found 1 error in src/index.ts:3
"""

ESLINT = """\

/home/dev/code/web/src/app.js
  1:7   error    'unused' is assigned a value but never used  no-unused-vars
  4:3   warning  Unexpected console statement                 no-console

✖ 2 problems (1 error, 1 warning)

"""

MYPY = """\
src/billing/invoice.py:14: error: Incompatible types in assignment (expression has type "str", variable has \
type "int")  [assignment]
src/billing/export.py:3: error: Module "csv" has no attribute "writerr"  [attr-defined]
Found 2 errors in 2 files (checked 12 source files)
"""

RUFF_CONCISE = """\
src/billing/invoice.py:1:8: F401 [*] `os` imported but unused
Found 1 error.
[*] 1 fixable with the `--fix` option.
"""

RUFF_FULL = """\
F401 [*] `os` imported but unused
 --> src/billing/invoice.py:1:8
  |
1 | import os
  |        ^^
  |
help: Remove unused import: `os`

Found 1 error.
[*] 1 fixable with the `--fix` option.
"""

NPM_MISSING_SCRIPT = """\
npm ERR! Missing script: "build"
npm ERR!
npm ERR! To see a list of scripts, run:
npm ERR!   npm run

npm ERR! A complete log of this run can be found in:
npm ERR!     /home/dev/.npm/_logs/2024-05-01T10_00_00_000Z-debug-0.log
"""

NPM_404 = """\
npm error code E404
npm error 404 Not Found - GET https://registry.npmjs.org/left-padd - Not found
npm error 404
npm error 404  'left-padd@*' is not in this registry.
npm error A complete log of this run can be found in: /home/dev/.npm/_logs/debug-0.log
"""

NPM_TEST_JEST = """\
> web@1.0.0 test
> jest

FAIL src/sum.test.js
  ● sum › adds 1 + 2 to equal 3

Tests:       1 failed, 1 total
npm ERR! code ELIFECYCLE
npm ERR! errno 1
npm ERR! web@1.0.0 test: `jest`
npm ERR! Exit status 1
"""

PIP = """\
ERROR: Could not find a version that satisfies the requirement openpyxll (from versions: none)
ERROR: No matching distribution found for openpyxll
"""

PIP_BUILD = """\
  error: subprocess-exited-with-error

  × Getting requirements to build wheel did not run successfully.
  │ exit code: 1
  ╰─> [3 lines of output]
      Traceback (most recent call last):
        File "setup.py", line 1, in <module>
      ModuleNotFoundError: No module named 'setuptools'
      [end of output]

  note: This error originates from a subprocess, and is likely not a problem with pip.
"""

GIT_FATAL = "fatal: not a git repository (or any of the parent directories): .git\n"

GIT_PATHSPEC = "error: pathspec 'fix/login' did not match any file(s) known to git\n"

GIT_PUSH = """\
To github.com:acme/billing-api.git
 ! [rejected]        main -> main (fetch first)
error: failed to push some refs to 'github.com:acme/billing-api.git'
hint: Updates were rejected because the remote contains work that you do not
hint: have locally. This is usually caused by another repository pushing to
"""

MAKE = """\
cc -Wall -c main.c -o main.o
main.c:3:5: error: use of undeclared identifier 'totl'
    totl += 1;
    ^
1 error generated.
make: *** [Makefile:4: main.o] Error 1
"""

MAKE_ONLY = "make: *** No rule to make target 'deploy'.  Stop.\n"

BASH_NOT_FOUND = "bash: line 1: pnpm: command not found\n"
SH_NOT_FOUND = "/bin/sh: 1: pnpm: not found\n"

TRACEBACK = """\
Traceback (most recent call last):
  File "/home/dev/code/billing-api/app.py", line 3, in <module>
    import stripe
ModuleNotFoundError: No module named 'stripe'
"""

CHAINED = """\
Traceback (most recent call last):
  File "/home/dev/code/billing-api/config.py", line 8, in load
    return open(path).read()
           ^^^^^^^^^^
FileNotFoundError: [Errno 2] No such file or directory: 'config.toml'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/home/dev/code/billing-api/app.py", line 5, in <module>
    settings = load("config.toml")
  File "/home/dev/code/billing-api/config.py", line 10, in load
    raise RuntimeError("cannot load settings") from exc
RuntimeError: cannot load settings
"""

NODE = """\
node:internal/modules/cjs/loader:1080
  throw err;
  ^

Error: Cannot find module 'express'
Require stack:
- /home/dev/code/web/index.js
    at Module._resolveFilename (node:internal/modules/cjs/loader:1077:15)
    at Module._load (node:internal/modules/cjs/loader:922:27) {
  code: 'MODULE_NOT_FOUND',
  requireStack: [ '/home/dev/code/web/index.js' ]
}

Node.js v18.17.0
"""

GO_PANIC = """\
panic: runtime error: index out of range [5] with length 3

goroutine 1 [running]:
main.main()
\t/home/dev/calc/main.go:8 +0x1d
exit status 2
"""

COLOURED = "\x1b[31mFAILED\x1b[0m tests/test_a.py::test_b - ValueError: bad\r\n\x1b[31m1 failed\x1b[0m in 0.01s\r\n"


CASES = [
    ("pytest", PYTEST, "1 failed, 2 passed in 0.12s · FAILED tests/test_invoice.py::test_total_rounds - "
                       "AssertionError: assert Decimal('10.00') == Decimal('10.01')"),
    ("pytest-collection", PYTEST_COLLECTION,
     "1 error in 0.21s · ERROR tests/test_export.py · ModuleNotFoundError: No module named 'openpyxl'"),
    ("pytest-plain-assert", PYTEST_PLAIN_ASSERT, "assert 3 == 4"),
    ("pytest-quiet", PYTEST_QUIET,
     "1 failed, 3 passed in 0.40s · FAILED tests/test_auth.py::test_login_org_account - KeyError: 'org_id'"),
    ("unittest", UNITTEST, "FAILED (failures=1) · FAIL: test_add (test_calc.TestCalc.test_add) · "
                           "AssertionError: 3 != 4"),
    ("jest", JEST, "Tests: 1 failed, 3 passed, 4 total · ● sum › adds 1 + 2 to equal 3 · "
                   "toBe: Expected: 3, Received: 4"),
    ("jest-two", JEST_TWO, "Tests: 2 failed, 14 passed, 16 total · ● cart › applies the discount, "
                           "cart › rejects negative quantities · toEqual: Expected: 81, Received: 90"),
    ("vitest", VITEST, "Tests 1 failed | 5 passed (6) · FAIL src/cart.test.ts > cart > applies the discount · "
                       "AssertionError: expected 90 to be 81 // Object.is equality"),
    ("vitest-two", VITEST_TWO, "Tests 2 failed | 4 passed (6) · FAIL src/cart.test.ts > cart > applies the discount, "
                               "src/cart.test.ts > cart > rounds the total · AssertionError: expected 90 to be 81 "
                               "// Object.is equality"),
    ("node-tap", NODE_TAP, "3 failed, 1 passed, 4 total · not ok: subtracts, multiplies, parses config · "
                           "Expected values to be strictly equal: 2 !== 1"),
    ("node-tap-quoted", NODE_TAP_QUOTED, "1 failed, 0 passed, 1 total · not ok: parses config · "
                                         "Expected property name or '}' in JSON at position 1"),
    ("node-spec", NODE_SPEC, "3 failed, 1 passed, 4 total · ✖ subtracts, multiplies, parses config · "
                             "AssertionError [ERR_ASSERTION]: Expected values to be strictly equal: 2 !== 1"),
    ("mocha", MOCHA, "1 passing, 1 failing · 1) Array #indexOf() should return -1 when the value is not present · "
                     "AssertionError [ERR_ASSERTION]: 0 == -1"),
    ("go-test", GO_TEST, "FAIL example.com/calc 0.002s · --- FAIL: TestAdd · add_test.go:9: Add(1, 2) = 4; want 3"),
    ("go-subtests", GO_SUBTESTS, "FAIL example.com/calc 0.003s · --- FAIL: TestParse/empty, TestParse/spaces, TestAdd"
                                 " · parse_test.go:14: Parse(\"\") error = nil, want error"),
    ("go-build", GO_BUILD, "FAIL example.com/calc [build failed] · ./calc.go:5:2: undefined: fmt.Printl"),
    ("cargo-build", CARGO_BUILD, "error[E0308]: mismatched types at src/main.rs:4:18"),
    ("cargo-test", CARGO_TEST, "test result: FAILED. 1 passed; 1 failed · FAILED tests::rounds · assertion "
                               "`left == right` failed (at src/lib.rs:10:9)"),
    ("cargo-test-three", CARGO_TEST_THREE, "test result: FAILED. 1 passed; 3 failed · FAILED tests::adds, "
                                           "tests::parses, tests::zero · assertion `left == right` failed (at "
                                           "src/lib.rs:5:25)"),
    ("tsc", TSC, "src/index.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'."),
    ("tsc-pretty", TSC_PRETTY, "Found 1 error in src/index.ts:3 · src/index.ts:3:7 - error TS2322: Type 'string' "
                               "is not assignable to type 'number'."),
    ("eslint", ESLINT, "✖ 2 problems (1 error, 1 warning) · 1:7 error 'unused' is assigned a value but never used "
                       "no-unused-vars"),
    ("mypy", MYPY, "Found 2 errors in 2 files (checked 12 source files) · src/billing/invoice.py:14: error: "
                   "Incompatible types in assignment (expression has type \"str\", variable has type \"int\") "
                   "[assignment]"),
    ("ruff", RUFF_CONCISE, "Found 1 error. · src/billing/invoice.py:1:8: F401 [*] `os` imported but unused"),
    ("ruff-full", RUFF_FULL, "Found 1 error. · F401 [*] `os` imported but unused at src/billing/invoice.py:1:8"),
    ("npm-missing-script", NPM_MISSING_SCRIPT, 'npm ERR! Missing script: "build"'),
    ("npm-404", NPM_404, "npm error 404 Not Found - GET https://registry.npmjs.org/left-padd - Not found"),
    ("npm-test", NPM_TEST_JEST, "Tests: 1 failed, 1 total · ● sum › adds 1 + 2 to equal 3"),
    ("pip", PIP, "ERROR: Could not find a version that satisfies the requirement openpyxll (from versions: none)"),
    ("pip-build", PIP_BUILD, "ModuleNotFoundError: No module named 'setuptools'"),
    ("git-fatal", GIT_FATAL, "fatal: not a git repository (or any of the parent directories): .git"),
    ("git-pathspec", GIT_PATHSPEC, "error: pathspec 'fix/login' did not match any file(s) known to git"),
    ("git-push", GIT_PUSH, "! [rejected] main -> main (fetch first)"),
    ("make", MAKE, "main.c:3:5: error: use of undeclared identifier 'totl'"),
    ("make-only", MAKE_ONLY, "make: *** No rule to make target 'deploy'. Stop."),
    ("bash-not-found", BASH_NOT_FOUND, "bash: line 1: pnpm: command not found"),
    ("sh-not-found", SH_NOT_FOUND, "/bin/sh: 1: pnpm: not found"),
    ("traceback", TRACEBACK, "ModuleNotFoundError: No module named 'stripe'"),
    ("chained", CHAINED, "RuntimeError: cannot load settings (from FileNotFoundError: [Errno 2] No such file or "
                         "directory: 'config.toml')"),
    ("node", NODE, "Error: Cannot find module 'express'"),
    ("go-panic", GO_PANIC, "panic: runtime error: index out of range [5] with length 3"),
    ("coloured", COLOURED, "1 failed in 0.01s · FAILED tests/test_a.py::test_b - ValueError: bad"),
]


@pytest.mark.parametrize("output,expected", [(o, e) for _, o, e in CASES], ids=[n for n, _, _ in CASES])
def test_key_line_picks_the_informative_slice(output: str, expected: str) -> None:
    assert key_line(output) == expected


def test_unknown_output_falls_back_to_its_last_line_that_says_something() -> None:
    assert key_line("compressing...\n\ncurl: (6) Could not resolve hostt: api.example\n\n===\n") == \
        "curl: (6) Could not resolve hostt: api.example"
    assert key_line("String to replace not found in file.\nString: total = 1", last=False) == \
        "String to replace not found in file."


def test_tool_use_error_tags_are_dropped() -> None:
    assert key_line("<tool_use_error>File has not been read yet. Read it first before writing to it."
                    "</tool_use_error>") == "File has not been read yet. Read it first before writing to it."


@pytest.mark.parametrize("output", ["", "   \n\n", "=====\n-----\n"])
def test_nothing_to_say_is_empty(output: str) -> None:
    assert key_line(output) == ""


def test_long_outputs_are_read_at_both_ends_and_the_key_stays_short() -> None:
    noise = "\n".join(f"tests/test_case_{i}.py::test_{i} PASSED" for i in range(20_000))
    output = CARGO_BUILD + noise + "\n" + "x " * 400 + "\n1 failed, 19999 passed in 41.20s\n"
    key = key_line(output)
    assert key.startswith("1 failed, 19999 passed in 41.20s")
    assert len(key_line("ValueError: " + "word " * 400)) <= KEY_CHARS
    assert key_line("ValueError: " + "word " * 400).endswith("…")


def test_many_failing_tests_are_named_while_they_fit_and_the_rest_counted() -> None:
    names = "".join(f"--- FAIL: TestCase{i:03d} (0.00s)\n    case_test.go:9: wrong\n" for i in range(40))
    key = key_line(names + "FAIL\nFAIL\texample.com/calc\t0.010s\n")
    assert key.startswith("FAIL example.com/calc 0.010s · --- FAIL: TestCase000, TestCase001, ")
    assert "(+3" in key and "more) · case_test.go:9: wrong" in key
    assert len(key) <= KEY_CHARS


def test_a_tap_suite_whose_subtests_failed_is_not_named_and_its_count_is_not_the_cause() -> None:
    key = key_line(NODE_TAP)
    assert "math" not in key and "subtests failed" not in key
    assert "error: |-" not in key_line(NODE_TAP.replace("# fail 3", "").replace("# tests 4", ""))


def test_long_runner_outputs_keep_the_names_from_the_tail() -> None:
    passing = "".join(f"test tests::case_{i} ... ok\n" for i in range(4000))
    key = key_line(CARGO_TEST_THREE.replace("running 4 tests\n", "running 4004 tests\n" + passing))
    assert key.startswith("test result: FAILED. 1 passed; 3 failed · FAILED tests::adds, tests::parses, tests::zero")
