"""model.config: cluster configurations that cannot exist are rejected, and what profiles switch on."""

import pytest

from model.config import FAULTY_PROFILES, PINS, PROFILES, ClusterConfig, ConfigError, NodeConfig, Options, Timing, other_readings, profile


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_empty_voter_set_is_rejected():
    with pytest.raises(ConfigError) as raised:
        ClusterConfig(voters=())
    assert str(raised.value) == "the voter set is empty: a quorum needs at least one voter"


def test_empty_voter_set_is_rejected_even_with_observers():
    with pytest.raises(ConfigError, match="the voter set is empty"):
        ClusterConfig(voters=(), observers=(4, 5))


def test_duplicate_voter_is_rejected():
    with pytest.raises(ConfigError) as raised:
        ClusterConfig(voters=(1, 2, 1, 3))
    assert str(raised.value) == "duplicate node ids [1] (a node is either one voter or one observer)"


def test_duplicate_observer_is_rejected():
    with pytest.raises(ConfigError) as raised:
        ClusterConfig(voters=(1, 2, 3), observers=(5, 5))
    assert str(raised.value) == "duplicate node ids [5] (a node is either one voter or one observer)"


def test_node_both_voter_and_observer_is_rejected():
    with pytest.raises(ConfigError) as raised:
        ClusterConfig(voters=(1, 2, 3), observers=(4, 3, 2))
    assert str(raised.value) == "duplicate node ids [2, 3] (a node is either one voter or one observer)"


def test_negative_ids_are_rejected():
    with pytest.raises(ConfigError) as raised:
        ClusterConfig(voters=(1, -2, 3), observers=(-7,))
    assert str(raised.value) == "node ids must be non-negative, got [-7, -2]"


def test_node_id_zero_is_allowed():
    config = ClusterConfig(voters=(0, 1, 2))
    assert config.nodes == (0, 1, 2)
    assert config.node(0).is_voter


def test_unknown_profile_is_rejected_and_the_known_ones_listed():
    with pytest.raises(ConfigError) as raised:
        ClusterConfig(voters=(1, 2, 3), profile="nope")
    known = ", ".join(sorted(PROFILES | FAULTY_PROFILES))
    assert str(raised.value) == f"unknown profile 'nope'; known profiles: {known}"
    assert "kip595-literal-diverging" in known and "faulty-hw-any-epoch" in known


def test_profile_lookup_rejects_unknown_names():
    with pytest.raises(ConfigError, match=r"^unknown profile 'KIP595'; known profiles: "):
        profile("KIP595")


def test_node_of_a_non_member_is_rejected():
    config = ClusterConfig(voters=(1, 2, 3), observers=(4,))
    with pytest.raises(ConfigError) as raised:
        config.node(9)
    assert str(raised.value) == "node 9 is neither a voter [1, 2, 3] nor an observer [4]"


def test_node_of_a_non_member_without_observers():
    with pytest.raises(ConfigError) as raised:
        ClusterConfig(voters=(1,)).node(2)
    assert str(raised.value) == "node 2 is neither a voter [1] nor an observer []"


def test_node_config_of_a_voter_and_an_observer():
    timing = Timing(fetch_timeout_ms=500)
    config = ClusterConfig(voters=(1, 2, 3), observers=(4,), cluster_id="abc", profile="kip595-literal-diverging", timing=timing)
    assert config.nodes == (1, 2, 3, 4)
    voter = config.node(2)
    assert voter == NodeConfig(node_id=2, voters=(1, 2, 3), observers=(4,), cluster_id="abc", options=Options(diverging_epoch="below"), timing=timing)
    assert voter.is_voter and voter.majority == 2 and voter.replicas == (1, 2, 3, 4)
    observer = config.node(4)
    assert not observer.is_voter and observer.majority == 2 and observer.node_id == 4


def test_majority_of_voter_sets():
    assert [ClusterConfig(voters=tuple(range(1, n + 1))).node(1).majority for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]


def test_default_options_are_the_kip_as_the_model_reads_it():
    assert Options() == Options(
        diverging_epoch="at_most",
        hw_any_epoch=False,
        vote_without_log_check=False,
        forget_vote_on_restart=False,
        truncate_to_hw=False,
        skip_leader_change=False,
    )
    assert ClusterConfig(voters=(1,)).profile == "kip595"
    assert ClusterConfig(voters=(1,)).node(1).options == Options()


KAFKA_3_9 = {
    "vote_last_offset": "end-offset",
    "unattached_discovery": True,
    "discovery_includes_self": True,
    "vote_kept_with_leader": False,
    "unknown_high_watermark": True,
    "top_level_error_alone": True,
    "progress_timeout_resigns": True,
    "restart_resigned_ends_epoch": True,
    "resigned_resends_end_epoch": True,
    "stale_responses_ignored": True,
    "discovery_appends": True,
    "stalled_fetch_any_voter": True,
    "refused_fetch_without_high_watermark": True,
    "check_quorum_resets_on_majority": True,
    "voter_set_unchecked": True,
    "end_epoch_as_news": True,
    "conflicting_leader_fatal": True,
    "cluster_id_conflict_fatal": False,
    "describe_refusal_defaults": True,
    "invalid_request_response_fatal": True,
    "high_watermark_regression_fatal": True,
    "leader_change_lists_voters": True,
    "begin_epoch_heartbeat": True,
    "unexpected_fetch_error_elsewhere": True,
    "sole_voter_stands_at_start": True,
    "truncate_by_own_epochs": True,
    "fetch_max_wait_ms": 500,
    "held_fetches": True,
    "successor_backoff_strict": True,
}

# Kafka 3.8, before KIP-853.
KAFKA_3_8 = {name: value for name, value in KAFKA_3_9.items() if name not in ("unattached_discovery", "begin_epoch_heartbeat")} | {
    "unattached_voter_waits": True,
    "end_epoch_unlisted_first": True,
    "served_fetch_acknowledges": True,
    "leader_outside_voters_ignored": True,
}

# Kafka 4.0 (4.3 differs from it at a choice point, model.config.PINS, and in one option below).
KAFKA_4 = {name: value for name, value in KAFKA_3_9.items() if name != "vote_kept_with_leader"} | {
    "pre_vote": True,
    "leader_keeps_vote": False,
    "restart_candidate_first": True,
    "observer_fetch_timeout": False,
    "follower_refuses_votes": True,
}

# Kafka 4.1 on also carry the fetcher's high watermark in its Fetch (KIP-1166).
KAFKA_4_3 = KAFKA_4 | {"fetch_carries_high_watermark": True}

KAFKA_3_7 = KAFKA_3_8 | {"voter_set_checked_late": True, "observer_refetches_leader": True}

EXPECTED_PROFILES = {
    "kip595": {},
    "kip595-literal-diverging": {"diverging_epoch": "below"},
    "kafka-3.7": KAFKA_3_7,
    "kafka-3.8": KAFKA_3_8,
    "kafka-3.9": KAFKA_3_9,
    "kafka-4.0": KAFKA_4,
    "kafka-4.3": KAFKA_4_3,
    "faulty-hw-any-epoch": {"hw_any_epoch": True},
    "faulty-vote-no-log-check": {"vote_without_log_check": True},
    "faulty-forget-vote": {"forget_vote_on_restart": True},
    "faulty-truncate-to-hw": {"truncate_to_hw": True},
    "faulty-no-leader-change": {"skip_leader_change": True},
    "faulty-no-leader-change-hw-any-epoch": {"skip_leader_change": True, "hw_any_epoch": True},
    "faulty-leader-never-resigns": {"leader_never_resigns": True},
    "faulty-candidate-never-backs-off": {"candidate_never_backs_off": True},
    "faulty-prospective-never-gives-up": {"pre_vote": True, "prospective_never_gives_up": True},
}


def test_profile_names():
    assert set(PROFILES) == {"kip595", "kip595-literal-diverging", "kafka-3.7", "kafka-3.8", "kafka-3.9", "kafka-4.0", "kafka-4.3"}
    assert set(FAULTY_PROFILES) == set(EXPECTED_PROFILES) - set(PROFILES)
    assert all(name.startswith("faulty-") for name in FAULTY_PROFILES)


@pytest.mark.parametrize("name", sorted(EXPECTED_PROFILES))
def test_each_profile_switches_exactly_its_options(name):
    """A profile is the default options with only its own switches changed."""
    defaults = Options()
    options = profile(name)
    changed = {field: getattr(options, field) for field in Options.__struct_fields__ if getattr(options, field) != getattr(defaults, field)}
    assert changed == EXPECTED_PROFILES[name]
    assert (PROFILES | FAULTY_PROFILES)[name] == options
    assert ClusterConfig(voters=(1, 2, 3), observers=(4,), profile=name).node(4).options == options


def test_other_readings_set_back_one_option_or_take_another_pinned_alternative():
    """A profile's other readings: each of its own switches set back to the KIP's alone, and each
    alternative its pins exclude; the KIP's profile has none, and a Fetch record limit is a setting."""
    assert other_readings(ClusterConfig(voters=(1, 2, 3), fetch_max_records=1).node(1)) == {}
    node = ClusterConfig(voters=(1, 2, 3), profile="kafka-4.3", fetch_max_records=1).node(1)
    readings = other_readings(node)
    flipped = {name.removeprefix("option ").removesuffix(" flipped") for name in readings if name.startswith("option ")}
    assert flipped == set(EXPECTED_PROFILES["kafka-4.3"])
    pre_vote_off = readings["option pre_vote flipped"]
    assert not pre_vote_off.options.pre_vote and pre_vote_off.options.fetch_max_records == 1 and pre_vote_off.choices == node.choices
    picked = {name for name in readings if "=" in name}
    assert {name.split("=")[0] for name in picked} == set(PINS["kafka-4.3"])
    assert "FETCH-REQ-5=leadership-first" in picked and "FETCH-REQ-5=epoch-first" not in picked
    assert readings["ELECT-6=at-once"].choices.pick("ELECT-6") == "at-once"


def test_a_cluster_s_own_choices_steer_its_nodes_where_the_profile_leaves_the_point_open():
    """A search's reading (ClusterConfig.choices): taken at the open point OBS-2; the pin of RETRY-1 holds."""
    config = ClusterConfig(voters=(1, 2, 3), profile="kafka-4.3", choices=(("OBS-2", "one-voter:0"), ("RETRY-1", "nothing")))
    node = config.node(2).choices
    assert (node.pick("OBS-2"), node.pick("RETRY-1"), node.pick("ELECT-6")) == ("one-voter:0", "votes", "after-backoff")
    assert ClusterConfig(voters=(1, 2, 3), profile="kip595").node(2).choices.pick("OBS-2") == "every-voter"


def test_a_check_configuration_s_choices_are_parsed_and_a_wrong_one_refused():
    from conformance.explore.configs import CheckConfig, named_configs

    assert CheckConfig(choices="OBS-2=one-voter:0, FETCH-REQ-3=offset-out-of-range").cluster().choices == (
        ("FETCH-REQ-3", "offset-out-of-range"),
        ("OBS-2", "one-voter:0"),
    )
    assert named_configs()["corpus-diverge"].cluster().choices == (("OBS-2", "one-voter:0"),)
    with pytest.raises(ConfigError) as raised:
        CheckConfig(choices="OBS-2=sideways")
    assert str(raised.value) == "choices: OBS-2 has no alternative 'sideways'; it has every-voter, one-voter:N"
