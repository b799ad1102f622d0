"""vitlab chooses Keras's backend itself: ``vitlab convert model.keras`` runs without ``KERAS_BACKEND`` set
(Keras would otherwise fall back to TensorFlow), and a backend named but not installed is one line."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("keras")
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")  # keras internals
import keras_textbook as textbook  # noqa: E402


@pytest.fixture(scope="module")
def keras_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("keras") / "vit.keras"
    textbook.textbook_vit_tokens(positions="constant").save(path)  # built-in layers only: it loads back
    return path


def run_vitlab(args, tmp_path, **env):
    """``vitlab ARGS`` in a fresh process: no KERAS_BACKEND unless given, Keras's own config folder empty."""
    clean = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    clean.update(KERAS_HOME=str(tmp_path / "keras-home"), **env)
    code = "import sys; from vitlab.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], env=clean, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_convert_a_keras_file_without_keras_backend(keras_file, tmp_path):
    done = run_vitlab(["convert", str(keras_file), str(tmp_path / "vit.safetensors")], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and (tmp_path / "vit.safetensors").is_file()


@pytest.mark.slow
def test_a_backend_named_but_not_installed_is_one_line(keras_file, tmp_path):
    done = run_vitlab(
        ["convert", str(keras_file), str(tmp_path / "vit.safetensors")], tmp_path, KERAS_BACKEND="no-such-backend"
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "KERAS_BACKEND=no-such-backend" in done.stderr


def test_import_keras_keeps_a_keras_already_imported():
    import keras

    from vitlab.interop.keras.graph import import_keras

    assert import_keras() is keras and keras.backend.backend() == "torch"
