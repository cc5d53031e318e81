"""`holodesk doctor`'s checks of an OpenAI-compatible server (the remote backend) beyond reaching it.

- context: the server counts the prompt of a task's last step (POST /tokenize: `max_steps - 1` earlier
  steps, every screenshot the profile keeps, at this screen's size), the answer's tokens are added,
  and the sum is compared with the model's `max_model_len`; too small is a FAIL naming the
  `--max-model-len` to restart with. Too many screenshots for `--limit-mm-per-prompt` is a FAIL too.
- server flags: the vLLM flags that keep the profile's answers parseable: the tool-call parser for a
  profile of native tool calls (holo4), the structured-output backend otherwise (INFO).
- model: which H Company model the server's model name looks like, whether the chosen profile speaks
  its format, and for Holo3, Holo3.1, Holo4 and Holotron-3-Nano the vLLM command they need
  (docs/remote-server.md).
- try (`--try`): one real step on a canned screenshot through the profile, parsed or refused in words;
  an answer that does not parse blocks (doctor then does not say "ready").
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from holodesk.app.cli.canned_screen import canned_screenshot
from holodesk.app.cli.doctor_report import CheckResult, DoctorOptions, Status, printable
from holodesk.inference.context_fit import measure_context_need
from holodesk.inference.errors import BackendError, InferenceError, ParseError
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile, model_family
from holodesk.inference.profiles.holo3 import PARSER_FLAGS, HoloAgentProfile
from holodesk.inference.remote import RemoteBackend, RequestRejectedError

if TYPE_CHECKING:
    from holodesk.inference.context_fit import ContextNeed
    from holodesk.inference.profiles.base import Profile

# What a user should run (docs/remote-server.md); the structured-output part is what makes
# answers parse: guidance honours the schemas' maxLength (xgrammar let raw control characters through
# in vLLM 0.32), and without disable_any_whitespace a constrained model may write "{" then
# whitespace to max_tokens. Both are server flags: the request field is accepted and ignored.
STRUCTURED_OUTPUTS_FLAG = '--structured-outputs-config \'{"backend":"guidance","disable_any_whitespace":true}\''
DEFAULT_SCREEN = (1920, 1080)


def answer_flags(profile: Profile) -> tuple[str, str]:
    """The vLLM flags that make this profile's answers readable, and why: a profile that answers with
    native tool calls needs the tool-call and reasoning parsers; one held to a JSON schema needs the
    structured-output backend (which tool calls never go through)."""

    if isinstance(profile, HoloAgentProfile) and profile.native_tools:
        return (
            " ".join(PARSER_FLAGS),
            "the profile answers with native tool calls, which vLLM reads only with its tool-call parser",
        )
    return (
        STRUCTURED_OUTPUTS_FLAG,
        "a server setting; without it a constrained answer can run to max_tokens",
    )


def served_family(model: str) -> str | None:
    """The profile for a served model name of H Company's current agents (holo3, holo3.1, holo4,
    holotron3-nano), or None."""

    return model_family(model)


def vllm_command_for(model: str, profile: str) -> str:
    """The vLLM command that serves `model` as the profile needs (parsers, image limit), under its own name."""

    chosen = get_profile(profile)
    assert isinstance(chosen, HoloAgentProfile), profile
    # A profile held to a JSON schema (holo3, holo3.1, holotron3-nano) needs the structured-output backend too.
    structured = "" if chosen.native_tools else f" {STRUCTURED_OUTPUTS_FLAG}"
    if "/" in model:  # a hub id: served under its own name
        return f"{chosen.vllm_command(model)}{structured}"
    return f"{chosen.vllm_command('<the checkpoint>')}{structured} --served-model-name {model}"


def model_family_check(model: str, profile: str) -> CheckResult | None:
    """What doctor says of the served model's family: the vLLM command an H Company agent needs, and a
    WARN when the chosen profile does not speak its format."""
    family = served_family(model)
    if family is not None:
        command = vllm_command_for(model, family)
        # A profile of the family asked another way (holo3.1-tools: native tool calls) is the family's too.
        if isinstance(get_profile(profile), type(get_profile(family))):
            return CheckResult("model", Status.INFO, f"{model} with the {profile} profile; serve it with: {command}")
        return CheckResult(
            "model",
            Status.WARN,
            f"{model} looks like H Company's {family}, which the {profile} profile does not ask as it was "
            "trained (reasoning, image limit, tool calls)",
            fix=f"choose the {family} profile (--profile {family}), and serve it with: {command}",
        )
    return None


@dataclass(frozen=True, slots=True)
class TaskShape:
    """What the user's tasks look like, for the context check."""

    profile: str
    max_steps: int
    screen: tuple[int, int]


def check_server_fit(options: DoctorOptions, shape: TaskShape) -> Iterator[CheckResult]:
    """The context and image-limit check, the server flags, and with --try one step."""
    if not options.base_url:
        return
    backend = RemoteBackend(options.base_url, model=options.model)
    profile = get_profile(shape.profile)
    family = model_family_check(backend.model, shape.profile)
    if family is not None:
        yield family
    try:
        length = backend.model_context_length()
        need = measure_context_need(backend, profile, shape.screen, shape.max_steps)
    except RequestRejectedError as exc:
        keep = profile.budget.keep_screenshots
        if "image" in exc.server_message.lower():
            yield CheckResult(
                "images",
                Status.FAIL,
                f"the server refused a request with {keep} screenshots: {printable(exc.server_message, 300)}",
                fix=f'restart vLLM with --limit-mm-per-prompt \'{{"image":{keep + 1},"video":0}}\'',
                blocking=True,
            )
        else:
            yield CheckResult("context", Status.WARN, f"could not measure the prompt: {printable(str(exc), 300)}")
        need = None
        length = None
    except BackendError as exc:
        yield CheckResult("context", Status.WARN, f"could not ask the server: {printable(str(exc), 300)}")
        need = None
        length = None
    else:
        yield from _context_lines(length, need, shape)
    flags, why = answer_flags(profile)
    yield CheckResult(
        "server flags",
        Status.INFO,
        f"the {profile.name} profile's answers parse with {flags} on the vLLM command line ({why})",
    )
    if options.try_step:
        yield try_remote_step(backend, profile)


def _context_lines(length: int | None, need: ContextNeed | None, shape: TaskShape) -> Iterator[CheckResult]:
    task = f"a {shape.max_steps}-step task on a {shape.screen[0]}x{shape.screen[1]} screen"
    if need is None:
        detail = f"context {length} tokens" if length else "the server does not say its context length"
        yield CheckResult(
            "context",
            Status.INFO,
            f"{detail}; it cannot count a prompt (no /tokenize: not vLLM?), so whether {task} fits is not known",
        )
        return
    yield CheckResult(
        "images", Status.OK, f"a request with {need.images} screenshots is accepted (the most a step sends)"
    )
    measured = (
        f"{task} needs {need.total:,} tokens at its last step "
        f"({need.prompt_tokens:,} prompt with {need.images} screenshots + {need.answer_tokens:,} for the answer)"
    )
    if length is None:
        yield CheckResult("context", Status.INFO, f"{measured}; the server does not say its context length")
    elif need.total > length:
        yield CheckResult(
            "context",
            Status.FAIL,
            f"the model's context is {length:,} tokens, but {measured}: the server would refuse it mid-task",
            fix=f"restart vLLM with --max-model-len {need.suggested_max_model_len()} "
            "(or lower the step limit, or the screenshots kept)",
            blocking=True,
        )
    else:
        yield CheckResult("context", Status.OK, f"{length:,} tokens; {measured}")


def try_remote_step(backend: RemoteBackend, profile: Profile) -> CheckResult:
    """One step on the canned screenshot through the server; never acts."""

    policy = ModelPolicy(profile, backend)
    try:
        proposal = policy.propose("Archive the first unread email.", [], [canned_screenshot()])
    except ParseError as exc:
        timings = exc.timings
        spent = f"{timings.tokens_in} tokens in, {timings.tokens_out} out" if timings else "no timings"
        # Blocking: a server whose answers do not parse cannot run a task, so doctor must not say "ready".
        return CheckResult(
            "try",
            Status.FAIL,
            f"the server answered ({spent}), but the answer did not parse: {printable(str(exc))}",
            fix=f"start vLLM with {answer_flags(profile)[0]}, and check that it serves an H Company model "
            f"matching the {profile.name} profile (--profile)",
            blocking=True,
        )
    except InferenceError as exc:
        return CheckResult("try", Status.FAIL, printable(str(exc), limit=400), blocking=True)
    timings = proposal.timings
    spent = f" in {timings.total_s:.1f} s ({timings.tokens_in} tokens in, {timings.tokens_out} out)" if timings else ""
    return CheckResult("try", Status.OK, f"one step{spent} proposed: {printable(proposal.action.describe())}")
