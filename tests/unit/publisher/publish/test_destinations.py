"""Where a publish may go: SPECDEC_PUBLISH_ALLOWED_TARGETS compared as parsed URLs, else (with a bearer
token configured) only the campaign's own publish.target; refused before the dry run, naming the setting.
The live TLS listener that must see no connection is tests/integration/test_lake_https.py's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from contracts.events import PublishRequested
from services.publisher.app import publish_for
from services.publisher.errors import PublishRefused
from services.publisher.publish.credentials import check_destination
from services.publisher.publish.publish import publish_report
from services.runtime.bundle.bundle import BundleStore
from services.runtime.settings import RuntimeSettings
from services.runtime.url_prefix import parse_prefixes
from tests.unit.publisher.publish.test_review_point import FAST, Receiver
from tests.unit.publisher.synthetic import RUN, Spec, build, campaign

LAKE = "https://lake.example.com/reports"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    endpoint = Receiver()
    yield endpoint
    endpoint.close()


@pytest.mark.parametrize("url", [
    "https://lake.example.com/reports",
    "https://lake.example.com/reports/",
    "https://lake.example.com/reports/run-1?draft=false",
    "https://LAKE.Example.com:443/reports/run-1",
])
def test_a_prefix_covers_its_own_host_port_and_path_segments(url):
    (prefix,) = parse_prefixes(LAKE, "SPECDEC_PUBLISH_ALLOWED_TARGETS")
    assert prefix.covers(url)


@pytest.mark.parametrize("url", [
    "https://lake.example.com.evil/reports",  # another host that starts with the listed one
    "https://lake.example.com@evil/reports",  # userinfo: the host is evil
    "https://lake.example.com:443@evil/reports",
    "https://lake.example.com\\@evil/reports",
    "https://evil#@lake.example.com/reports",
    "https://evil?@lake.example.com/reports",
    "https://lake.example.com/reports-old",  # not on a segment boundary
    "https://lake.example.com/",  # above the prefix
    "https://lake.example.com/reports/../admin",
    "https://lake.example.com/reports/%2e%2e/admin",
    "https://lake.example.com/reports%2F..%2Fadmin",
    "https://lake.example.com:8443/reports",  # another port
    "http://lake.example.com/reports",  # another scheme
    "https://lake.example.com./reports",
    "not a url",
])
def test_a_prefix_covers_no_lookalike(url):
    (prefix,) = parse_prefixes(LAKE, "SPECDEC_PUBLISH_ALLOWED_TARGETS")
    assert not prefix.covers(url)


@pytest.mark.parametrize("entry", [
    "lake.example.com", "ftp://lake.example.com/", "https://user@lake.example.com/", "https://lake.example.com/?q=1",
    "https://lake.example.com/#f", "https://lake.example.com/reports/..", "https://lake.example.com/a/%2e%2e",
])
def test_a_bad_prefix_is_refused_when_the_settings_are_read_in_one_line(entry):
    with pytest.raises(ValidationError) as caught:
        RuntimeSettings(instance="t", publish_allowed_targets=f"https://ok.example.com/, {entry}")
    message = caught.value.errors()[0]["msg"]
    assert "SPECDEC_PUBLISH_ALLOWED_TARGETS" in message and entry in message and "\n" not in message


def test_the_decision_per_setting():
    token = dict(instance="t", publish_token_env="LAKE_TOKEN")
    # No token, no list: nothing secret leaves, any target (the review point still holds the report).
    check_destination(RuntimeSettings(instance="t"), "https://anywhere.example.net/x", reviewed=None)
    # A token, no list: only the campaign's own publish.target, compared parsed.
    check_destination(RuntimeSettings(**token), "https://LAKE.example.com:443/reports/", reviewed=LAKE)
    with pytest.raises(PublishRefused, match=r"not the campaign's publish.target .*SPECDEC_PUBLISH_ALLOWED_TARGETS"):
        check_destination(RuntimeSettings(**token), "https://lake.example.com/reports/other", reviewed=LAKE)
    with pytest.raises(PublishRefused, match="never allowed"):
        check_destination(RuntimeSettings(**token), "https://lake.example.com@evil/reports", reviewed=LAKE)
    # A list: it alone decides, token or not, the campaign's target included.
    listed = RuntimeSettings(instance="t", publish_allowed_targets="https://other.example.com/in")
    check_destination(listed, "https://other.example.com/in/run-1", reviewed=LAKE)
    for settings in (listed, listed.model_copy(update={"publish_token_env": "LAKE_TOKEN"})):
        with pytest.raises(PublishRefused, match="outside SPECDEC_PUBLISH_ALLOWED_TARGETS"):
            check_destination(settings, LAKE, reviewed=LAKE)


async def test_a_listed_setting_refuses_an_unlisted_target_before_the_dry_run_without_a_connection(clean, receiver):
    bundle, _ = clean
    elsewhere = RuntimeSettings(instance="t", publish_allowed_targets="https://lake.example.com/")
    for ack in (None, "cli"):
        with pytest.raises(PublishRefused, match="outside SPECDEC_PUBLISH_ALLOWED_TARGETS") as caught:
            await publish_report(bundle, RUN, receiver.url, acknowledged_by=ack, settings=elsewhere, policy=FAST)
        assert "\n" not in str(caught.value)
    assert receiver.http.connections == 0 and not list(bundle.run_dir(RUN).glob("publish/dry-run/*"))
    # Listed: the same endpoint receives it.
    listed = RuntimeSettings(instance="t", publish_allowed_targets=receiver.url)
    await publish_report(bundle, RUN, receiver.url + "/listed", acknowledged_by=None, settings=listed, policy=FAST)
    pub = await publish_report(bundle, RUN, receiver.url + "/listed", acknowledged_by="cli", settings=listed,
                               policy=FAST)
    assert not pub.dry_run and len(receiver.bodies) == 1


async def test_the_service_publishes_nowhere_outside_the_list_even_to_the_campaigns_target(tmp_path, receiver):
    bundle = BundleStore(tmp_path / "bundles", fsync=False)
    spec = Spec(publish_target=receiver.url, acknowledged=True)
    build(bundle, spec)
    pinned = RuntimeSettings(instance="t", publish_allowed_targets="https://lake.example.com/")
    event = PublishRequested(run_id=RUN, producer="t", requested_by="t@test")
    with pytest.raises(PublishRefused, match="outside SPECDEC_PUBLISH_ALLOWED_TARGETS"):  # publish.failed, its reason
        await publish_for(bundle, event, campaign(spec), producer="publisher/t", settings=pinned)
    assert receiver.http.connections == 0


def test_specdec_publish_says_the_refusal_and_a_bad_setting_in_one_line(clean, receiver, monkeypatch, capsys):
    from services.cli.main import main

    bundle, _ = clean
    monkeypatch.setenv("SPECDEC_BUNDLE_ROOT", str(bundle.root))
    monkeypatch.setenv("SPECDEC_PUBLISH_TOKEN_ENV", "SPECDEC_GUARD_PUBLISH_TOKEN")
    monkeypatch.setenv("SPECDEC_GUARD_PUBLISH_TOKEN", "t0ken-not-for-elsewhere")
    elsewhere = receiver.url.replace("http://", "https://")  # the receiver's port: a connection would count
    assert main(["publish", RUN, "--target", elsewhere]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not the campaign's publish.target" in err
    assert "SPECDEC_PUBLISH_ALLOWED_TARGETS" in err
    assert "t0ken" not in err and receiver.http.connections == 0
    monkeypatch.setenv("SPECDEC_PUBLISH_ALLOWED_TARGETS", "https://user@lake.example.com/")
    assert main(["publish", RUN, "--target", elsewhere]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "SPECDEC_PUBLISH_ALLOWED_TARGETS" in err and "Traceback" not in err
