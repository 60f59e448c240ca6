"""The cluster file: units, defaults from the hardware module, one-line errors."""

import pytest

from infralens.hardware import GPUS
from infralens.parallel.cluster import ClusterError, cluster_from_dict, load_cluster, parse_bandwidth


def test_units():
    assert parse_bandwidth("400 Gb/s", "x") == 50e9
    assert parse_bandwidth("450 GB/s", "x") == 450e9
    assert parse_bandwidth("1.5TB/s", "x") == 1.5e12
    assert parse_bandwidth(25e9, "x") == 25e9


@pytest.mark.parametrize("bad", ["fast", "-1 GB/s", "0 GB/s", True, "nan GB/s", [1]])
def test_bad_bandwidth(bad):
    with pytest.raises(ClusterError):
        parse_bandwidth(bad, "inter_node_bandwidth")


def test_defaults_come_from_the_hardware_module():
    c = cluster_from_dict({"gpu": "h100", "nodes": 1, "gpus_per_node": 8})
    assert c.intra_node_bandwidth == GPUS["h100"].nvlink_bandwidth_bytes_per_s.value / 2
    assert c.n_gpus == 8 and c.inter_node_bandwidth == c.intra_node_bandwidth  # one node


@pytest.mark.parametrize("raw,message", [
    ({"gpu": "h100", "nodes": 2, "gpus_per_node": 8}, "inter_node_bandwidth"),
    ({"gpu": "v100", "nodes": 1, "gpus_per_node": 8}, "unknown gpu"),
    ({"gpu": "h100", "nodes": 0, "gpus_per_node": 8}, "'nodes'"),
    ({"gpu": "h100", "nodes": 1, "gpus_per_node": 8, "speed": 1}, "unknown field"),
    ({"gpu": "h100", "nodes": 1, "gpus_per_node": 8, "efficiency": {"matmul": 1.5}}, "fraction"),
    ([1, 2], "mapping"),
])
def test_bad_clusters(raw, message):
    with pytest.raises(ClusterError, match=message):
        cluster_from_dict(raw)


def test_files(tmp_path):
    good = tmp_path / "c.yaml"
    good.write_text("gpu: a100\nnodes: 4\ngpus_per_node: 8\ninter_node_bandwidth: 200 Gb/s\n")
    assert load_cluster(good).inter_node_bandwidth == 25e9
    broken = tmp_path / "b.yaml"
    broken.write_text("gpu: [a100\n")
    with pytest.raises(ClusterError, match="not valid YAML"):
        load_cluster(broken)
    with pytest.raises(ClusterError, match="cannot read"):
        load_cluster(tmp_path / "missing.yaml")
