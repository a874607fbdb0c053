"""Argv templates: whitelisted placeholders, literal braces, verbatim values, and
the refusal of acknowledgement-looking tokens."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contracts.argv import PLACEHOLDERS, ArgvError, ArgvTemplate, check_token


def template(*argv: str) -> ArgvTemplate:
    return ArgvTemplate(list(argv))


def test_whitelisted_placeholders_render_verbatim_without_resplitting():
    argv = template("trainer", "--out", "{output_dir}", "--port={port}", "{training.output}", "{run_id}-{node}")
    hostile = "/tmp/a b; rm -rf / $(x) 'q'"
    values = {"output_dir": hostile, "port": "8000", "training.output": "/ckpt", "run_id": "r-1", "node": "n 2"}
    rendered = argv.render(values)
    assert rendered == ["trainer", "--out", hostile, "--port=8000", "/ckpt", "r-1-n 2"]
    # One token in, one token out: a value with spaces is never split.
    assert len(rendered) == len(argv.root)


def test_a_value_that_looks_like_a_placeholder_is_not_expanded_again():
    rendered = template("serve", "{model}").render({"model": "{run_id}{{x}}", "run_id": "SHOULD-NOT-APPEAR"})
    assert rendered == ["serve", "{run_id}{{x}}"]


def test_doubled_braces_are_literal_braces():
    argv = template("vllm", "--speculative-config", '{{"method": "ngram", "port": {port}}}', "}}{{")
    assert argv.placeholders() == {"port"}
    assert argv.render({"port": "9"}) == ["vllm", "--speculative-config", '{"method": "ngram", "port": 9}', "}{"]


def test_placeholders_lists_every_field_used():
    argv = template("x", "{corpus_train}", "a{target}b{tokenizer}", "plain")
    assert argv.placeholders() == {"corpus_train", "target", "tokenizer"}


def test_every_whitelisted_placeholder_is_accepted():
    argv = template("prog", *("{" + name + "}" for name in PLACEHOLDERS))
    values = {name: f"<{name}>" for name in PLACEHOLDERS}
    assert argv.render(values)[1:] == [f"<{name}>" for name in PLACEHOLDERS]


def test_an_unknown_placeholder_is_rejected_with_the_allowed_list():
    with pytest.raises(ValidationError) as err:
        template("trainer", "--data", "{dataset}")
    message = str(err.value)
    assert "unknown placeholder {dataset}" in message
    for name in PLACEHOLDERS:
        assert "{" + name + "}" in message, f"{name} missing from the allowed list"


@pytest.mark.parametrize("token", ["{ port }", "{Port}", "{}", "{run-id}", "{training}"])
def test_near_misses_of_placeholders_are_unknown(token: str):
    with pytest.raises(ArgvError, match="unknown placeholder"):
        check_token(token)


@pytest.mark.parametrize("token", ["{port", "port}", "{", "}", "a{b{port}}", "{{port}"])
def test_unbalanced_braces_are_rejected(token: str):
    with pytest.raises(ValidationError, match="unbalanced brace"):
        template("prog", token)


@pytest.mark.parametrize(
    "token",
    [
        "--i-understand-this-mutates-cluster",
        "--I-UNDERSTAND-THIS-MUTATES-CLUSTER",
        "I_UNDERSTAND_THIS_MUTATES_CLUSTER=true",
        "i_understand_this_publishes_externally=1",
        "i understand",
        "I  Understand",
        "--flag=yes,i-understand",
        "IUnderstand",
    ],
)
def test_acknowledgement_looking_tokens_are_rejected(token: str):
    with pytest.raises(ValidationError) as err:
        template("trainer", "--epochs", "1", token)
    assert "looks like an acknowledgement" in str(err.value)
    assert repr(token) in str(err.value)


def test_an_acknowledgement_as_the_program_is_rejected_too():
    with pytest.raises(ValidationError, match="acknowledgement"):
        template("i-understand-this-mutates-cluster")


@pytest.mark.parametrize("argv", [[], [""], ["   ", "x"]])
def test_an_empty_argv_or_program_is_rejected(argv: list[str]):
    with pytest.raises(ValidationError, match="program|at least"):
        ArgvTemplate(argv)


def test_rendering_a_placeholder_without_a_value_is_an_error():
    with pytest.raises(ArgvError, match=r"\{corpus\} has no value"):
        template("trainer", "{corpus}").render({"run_id": "r"})


def test_ordinary_tokens_pass_unchanged():
    argv = template("python", "-c", "import sys; sys.exit(0)", "--understand", "under-stand")
    assert argv.render({}) == ["python", "-c", "import sys; sys.exit(0)", "--understand", "under-stand"]


def test_a_flag_placeholder_renders_one_whole_token_or_drops_its_item():
    argv = template("vllm", "{enforce_eager_flag}", "--port", "{port}", "{max_num_seqs_flag}")
    assert argv.render({"enforce_eager_flag": "--enforce-eager", "port": "9", "max_num_seqs_flag": ""}) == [
        "vllm", "--enforce-eager", "--port", "9"]
    assert argv.render({"enforce_eager_flag": "", "port": "9", "max_num_seqs_flag": "--max-num-seqs=8"}) == [
        "vllm", "--port", "9", "--max-num-seqs=8"]


def test_an_empty_value_placeholder_still_renders_its_token():
    # Only flag placeholders drop their item; a value placeholder keeps its position.
    assert template("vllm", "--quantization", "{quantization}").render({"quantization": ""}) == [
        "vllm", "--quantization", ""]


@pytest.mark.parametrize("token", ["--x={enforce_eager_flag}", "{enforce_eager_flag}{port}", " {ignore_eos_flag}"])
def test_a_flag_placeholder_inside_a_token_is_refused(token: str):
    with pytest.raises(ValidationError, match="stands for a whole argv token"):
        template("prog", token)


def test_flag_placeholders_are_the_whitelisted_names_ending_in_flag():
    from contracts.argv import FLAG_PLACEHOLDERS

    assert FLAG_PLACEHOLDERS == {"enforce_eager_flag", "quantization_flag", "max_num_seqs_flag",
                                 "speculative_config_flag", "ignore_eos_flag"}
    assert FLAG_PLACEHOLDERS <= set(PLACEHOLDERS)
