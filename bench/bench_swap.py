"""How long a new robot_description takes to serve, idle and under load (issue 40).

The node serves a new model once it is parsed (its compiled kernels follow in the background;
the reference answers meanwhile). Measured from outside, over DDS:

1. idle: the bundled ur recalibrated (its upper arm 1.1 mm longer, a few nm more on each try so
   that no kernel cache holds it): from the publish to the first answer that names the new
   model (a client asking at 100 Hz), and to the first answer from the compiled kernels;
2. the same with both cores kept busy by two processes and eight clients asking 250 times a
   second in all (test/swap_client.py), swaps ur -> panda -> ur recalibrated -> panda; the
   times from the node's log (publish -> "serves");
3. big descriptions: 1,500 chained mimic joints, 20,000 links (7 MB): publish -> "serves".

    python bench/bench_swap.py [--tries 5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "test"))

import numpy as np  # noqa: E402

from common import banner, load_average  # noqa: E402
from ros2_ik import robots  # noqa: E402
from ros_testing import Client, NodeProcess, ik_request, random_domain_id  # noqa: E402
from test_ros_model_swap import (_big_tree, _mimic_chain, log_events,  # noqa: E402
                                 recalibrated_ur)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def idle(tries: int) -> None:
    domain = random_domain_id()
    node = NodeProcess(domain, params={"robot": "ur"})
    client = Client(domain)
    try:
        client.wait_for_server(60)
        node.wait_for_log("]: ready: ", 120)
        client.publish_robot_description(robots.urdf_string("ur"))  # (the publisher matched)
        node.wait_for_count("robot_description received", 1, 30)
        req = ik_request(np.array([[0.3, 0.2, 0.4, 1, 0, 0, 0]]), compact_response=True)
        serve, compiled = [], []
        for _ in range(tries):
            recal = recalibrated_ur()
            d = _digest(recal)
            t0 = time.monotonic()
            client.publish_robot_description(recal)
            first = None
            while time.monotonic() - t0 < 120:
                r = client.call(client.ik, req, timeout=30)
                if r.model_digest == d and first is None:
                    first = time.monotonic() - t0
                if r.model_digest == d and r.backend == "host":
                    compiled.append(time.monotonic() - t0)
                    break
                time.sleep(0.01)
            serve.append(first)
        print(f"1. idle, {tries} swaps to a recalibrated ur (kernels never cached): publish -> "
              f"first answer by the new model median {statistics.median(serve):.3f} s (max "
              f"{max(serve):.3f} s); -> first answer from its compiled kernels median "
              f"{statistics.median(compiled):.2f} s (the reference answers until then)")
        print(f"   {load_average()}")
    finally:
        client.close()
        node.stop()


def loaded() -> None:
    ur, panda, recal = robots.urdf_string("ur"), robots.urdf_string("panda"), recalibrated_ur()
    domain = random_domain_id()
    node = NodeProcess(domain, params={"robot": ""})
    pub = Client(domain, node_name="swap_publisher", executor="single")
    tmp = Path(tempfile.mkdtemp(prefix="bench_swap_"))
    clients, hot = [], []
    try:
        pub.publish_robot_description(ur)
        pub.wait_for_server(60)
        node.wait_for_log("model 1 (", 120)
        env = dict(os.environ, ROS_DOMAIN_ID=str(domain), PYTHONPATH=os.pathsep.join(
            [str(HERE.parent / "test"), os.environ.get("PYTHONPATH", "")]))
        hot = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
        for k in range(8):
            clients.append(subprocess.Popen(
                [sys.executable, str(HERE.parent / "test" / "swap_client.py"), str(domain),
                 "31.25", "16", str(k), str(tmp / f"c{k}.json")], env=env,
                stdout=subprocess.PIPE, text=True))
        for c in clients:
            c.stdout.readline()
        published = []
        for urdf in (panda, recal, panda):
            time.sleep(3.0)
            published.append(time.time())
            pub.publish_robot_description(urdf)
        load = load_average()
        for c in clients:
            c.wait(timeout=120)
    finally:
        for p in hot:
            p.kill()
        pub.close()
        node.stop()
    received, served = log_events(node.log_text())
    swaps = [s[0] - p for p, s in zip(published, served[1:])]
    recs = [r for k in range(8) for r in json.loads((tmp / f"c{k}.json").read_text())]
    first = []
    for p, s in zip(published, served[1:]):
        after = [r["answered"] for r in recs if r.get("version") == s[1]]
        first.append(min(after) - p if after else float("nan"))
    span = max(r["sent"] for r in recs) - min(r["sent"] for r in recs)
    print(f"2. under load (2 busy processes, 8 clients: {len(recs) / span:.0f} requests/s "
          f"answered, {sum(1 for r in recs if r.get('lost'))} lost): publish -> serves "
          f"{', '.join(f'{t:.3f}' for t in swaps)} s; -> first answer by it "
          f"{', '.join(f'{t:.3f}' for t in first)} s")
    print(f"   {load}")


def big() -> None:
    domain = random_domain_id()
    node = NodeProcess(domain, params={"robot": "panda"})
    client = Client(domain)
    try:
        client.wait_for_server(60)
        node.wait_for_log("]: ready: ", 120)
        for k, (name, text) in enumerate((("1,500 chained mimics", _mimic_chain(1500)),
                                          ("20,000 links", _big_tree(20_000)))):
            t0 = time.time()
            client.publish_robot_description(text)
            node.wait_for_count(" serves, loaded in", k + 2, 120)
            received, served = log_events(node.log_text())
            print(f"3. {name} ({len(text) / 1e6:.1f} MB): publish -> received "
                  f"{received[-1][0] - t0:.2f} s, -> serves {served[-1][0] - t0:.2f} s")
        print(f"   {load_average()}")
    finally:
        client.close()
        node.stop()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=5)
    args = ap.parse_args(argv)
    print(banner("bench_swap (issue 40)"))
    import rclpy

    print(f"rclpy from {Path(rclpy.__file__).parent}; {load_average()} at start")
    idle(args.tries)
    loaded()
    big()
    return 0


if __name__ == "__main__":
    sys.exit(main())
