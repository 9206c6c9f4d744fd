"""The tasks and trainers moved from attention_np.nn to attention_np.training in 0.3; their old
attribute paths work for one release, with a DeprecationWarning that names the new home and
points at the caller's line (attention_np/_checks.py's warn_deprecated), not a line inside the
package (which Python's default filters would hide)."""

import subprocess
import sys
from pathlib import Path

import pytest

import attention_np as an
from attention_np import training

ROOT = Path(__file__).resolve().parents[2]
MOVED = ["AdamState", "adam_init", "adam_step", "transformer_lr", "ReversalTask", "TrainResult",
         "evaluate", "train", "adam", "tasks", "trainer", "dates", "seq2seq_trainer"]


@pytest.mark.parametrize("name", MOVED)
def test_an_old_nn_path_warns_from_the_callers_line_and_is_the_training_name(name):
    with pytest.warns(DeprecationWarning, match=rf"^attention_np\.nn\.{name} is deprecated since "
                                                rf"0\.3\.0: it is attention_np\.training\.{name} ") as record:
        old = getattr(an.nn, name)
    assert old is getattr(training, name)
    assert {w.filename for w in record} == {__file__}


def test_the_list_of_moved_names_is_the_module_s():
    from attention_np import nn
    assert sorted(nn.MOVED_TO_TRAINING) == sorted(MOVED)
    assert not set(MOVED) & set(nn.__all__)                   # the old names are not advertised


def test_from_import_works_and_warns_at_the_import_line():
    code = ("import warnings\nwarnings.simplefilter('always')\n"
            "from attention_np.nn import train  # line 3\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=True)
    assert "<string>:3: DeprecationWarning: attention_np.nn.train is deprecated" in run.stderr


def test_a_name_that_never_was_in_nn_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'bogus'"):
        an.nn.bogus  # noqa: B018
