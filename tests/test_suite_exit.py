"""The test process ends with pytest's exit status after Python's exit handlers have run, and
skips the interpreter's finalization (tests/conftest.py says why). Checked in a child pytest with
this suite's conftest: a failure still fails the process, every exit handler still runs."""
import os
import pathlib
import subprocess
import sys

import pytest

CONFTEST = pathlib.Path(__file__).with_name("conftest.py")

TESTS = '''
import atexit

def _mark():
    with open("handler-ran", "a") as f:
        f.write("yes\\n")

def test_registers_a_handler():
    atexit.register(_mark)

def test_outcome():
    assert OUTCOME
'''


@pytest.mark.parametrize("finalize", ["0", "1"])
@pytest.mark.parametrize("outcome,status", [(True, 0), (False, 1)])
def test_exit_status_and_handlers(tmp_path, outcome, status, finalize):
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    (tmp_path / "test_child.py").write_text(TESTS.replace("OUTCOME", str(outcome)))
    env = {**os.environ, "JURY_TEST_FINALIZE": finalize}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_child.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == status, proc.stdout + proc.stderr
    assert (tmp_path / "handler-ran").read_text() == "yes\n"
    assert ("1 failed" in proc.stdout) == (not outcome)  # the summary was written out before the exit
