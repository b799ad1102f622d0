"""Option values checked at the door, before any work: a mirror that is not a URL, an overlay ``--out`` that is not
an image file name; each one line (exit 2), never urllib's or PIL's ValueError."""

import pytest

from vitlab.cli.main import main
from vitlab.errors import ConfigError
from vitlab.tasks.dense.spec import overlay_path
from vitlab.tasks.requests import PredictRequest


@pytest.mark.parametrize("mirror", ["notaurl", "ftp://host/x", "http://", "/some/folder", "https:///x"])
@pytest.mark.parametrize("how", ["option", "env"])
def test_a_mirror_that_is_not_a_url_is_one_line(mirror, how, tmp_path, capsys, monkeypatch):
    argv = ["data", "download", "mnist", "--to", str(tmp_path / "mnist")]
    if how == "option":
        argv += ["--mirror", mirror]
    else:
        monkeypatch.setenv("VITLAB_DATA_MIRROR", mirror)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and repr(mirror) in err and "is not a URL" in err, err
    assert not any((tmp_path / "mnist").glob("*.part"))


@pytest.mark.parametrize("out", ["DIR", "overlay", "overlay.txt", "overlay.png/"])
def test_an_overlay_out_that_is_not_an_image_file_is_refused_before_the_model_runs(out, tmp_path):
    (tmp_path / "DIR").mkdir()
    request = PredictRequest(checkpoint="run", images=["x.png"], out=f"{tmp_path}/{out}")
    with pytest.raises(ConfigError, match="--out .* writes one overlay image"):
        overlay_path(request, "dense")
    assert overlay_path(PredictRequest(checkpoint="run", images=["x.png"], out=str(tmp_path / "o.PNG")), "dense")
