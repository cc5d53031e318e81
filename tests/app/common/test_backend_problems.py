"""Failures in words: what to do is added by kind; the load-failure balloon offers the remote server."""

from __future__ import annotations

from holodesk.app.common.backend_problems import REMOTE_OFFER, in_words, load_failure_in_words
from holodesk.inference.errors import BackendError, ModelLoadError


class ServerUnreachableError(BackendError):
    """Named as the remote backend names it: the advice goes by the class's name."""


def test_a_known_failure_gets_what_to_do():
    said = in_words(ServerUnreachableError("Nothing is listening at http://gpu:8000/v1 (connection refused)"))
    assert said.startswith("Nothing is listening at http://gpu:8000/v1 (connection refused). Start the model server")


def test_a_model_load_error_is_shown_as_it_is():
    assert (
        in_words(ModelLoadError("No model directory at /x. Give a directory."))
        == "No model directory at /x. Give a directory."
    )


def test_the_no_gpu_balloon_offers_the_remote_server_and_drops_upgrade_advice():
    reason = (
        "CUDA is not available on this machine. You can update Transformers with the command "
        "`pip install --upgrade transformers`."
    )
    said = load_failure_in_words(reason, "local")
    assert "upgrade transformers" not in said and "do not upgrade it" in said
    assert said.endswith(REMOTE_OFFER) and "25 GB" in REMOTE_OFFER
    assert load_failure_in_words("server down", "remote") == "server down"


def test_without_a_gpu_the_balloon_offers_the_server_not_the_download():
    reason = "Hcompany/Holotron-12B is not in the Hugging Face cache. Download it once (about 25 GB)."
    said = load_failure_in_words(reason, "local", no_gpu=True)
    assert "remote" in said and "server" in said and "Download it once" not in said
