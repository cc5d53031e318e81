"""The advice for an optional part fits how Holodesk was installed: the package's own requirements file
and pip from the Debian package, the extra elsewhere."""

from __future__ import annotations

from pathlib import Path

from holodesk.app.common.install_advice import install_extra, packaged


def test_from_the_package_the_advice_is_its_own_pip_and_requirements_file(tmp_path: Path) -> None:
    prefix, share = tmp_path / "usr/lib/holodesk", tmp_path / "usr/share/holodesk"
    prefix.mkdir(parents=True)
    said = install_extra("eval", prefix=prefix, share=share, running=str(prefix))
    assert said == f"sudo {prefix}/bin/pip install -r {share}/eval-requirements.txt"
    assert "holodesk[" not in said


def test_elsewhere_the_advice_is_the_extra(tmp_path: Path) -> None:
    prefix = tmp_path / "usr/lib/holodesk"
    prefix.mkdir(parents=True)
    said = install_extra("eval", prefix=prefix, running=str(tmp_path / "venv"))
    assert said == "pip install 'holodesk[eval]' (from a source tree: pip install -e '.[eval]')"
    assert not packaged()  # the tests run from the repository's own environment
