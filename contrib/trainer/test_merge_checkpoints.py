"""Tests of merge_checkpoints (needs torch; skipped without it).

    python3 -m unittest discover -s contrib/trainer -p 'test_*.py'
"""

import os
import subprocess
import sys
import tempfile
import unittest

try:
    import torch
except ImportError:  # the client's own tests need no torch
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))


@unittest.skipIf(torch is None, "torch is not installed")
class MergeTest(unittest.TestCase):
    def setUp(self):
        sys.path.insert(0, HERE)
        import merge_checkpoints
        self.m = merge_checkpoints

    def test_weighted_mean_exact_and_non_float_kept(self):
        a = {"w": torch.tensor([1.0, 2.0]), "n": torch.tensor([7])}
        b = {"w": torch.tensor([3.0, 5.0]), "n": torch.tensor([8])}
        out = self.m.merge_state([a, b], [1.0, 3.0])
        self.assertTrue(torch.equal(out["w"], torch.tensor([2.5, 4.25])))
        self.assertEqual(out["w"].dtype, torch.float32)
        self.assertTrue(torch.equal(out["n"], torch.tensor([7])))  # taken from the first

    def test_mismatch_fails(self):
        with self.assertRaises(ValueError):
            self.m.merge_state([{"w": torch.zeros(2)}, {"v": torch.zeros(2)}], [1, 1])
        with self.assertRaises(ValueError):
            self.m.merge_state([{"w": torch.zeros(2)}, {"w": torch.zeros(3)}], [1, 1])

    def test_cli_writes_done_marker_inside_the_store(self):
        d = tempfile.mkdtemp()
        ins = []
        for i, x in enumerate((1.0, 2.0, 6.0)):
            p = os.path.join(d, "in%d" % i)
            os.makedirs(p)
            torch.save({"model": {"w": torch.full((3,), x)}, "step": 4}, os.path.join(p, "rank-0.pt"))
            ins.append(p)
        store = os.path.join(d, "store")
        os.makedirs(store)
        env = dict(os.environ, TRAINRUN_CKPT_DIR=store, RANK="0", WORLD_SIZE="1")
        r = subprocess.run([sys.executable, os.path.join(HERE, "merge_checkpoints.py"), "--out", os.path.join(store, "merged")] + ins,
                           env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = torch.load(os.path.join(store, "merged", "rank-0.pt"))
        self.assertTrue(torch.equal(got["model"]["w"], torch.full((3,), 3.0)))
        self.assertTrue(os.path.exists(os.path.join(store, "merged", ".trainrun", "done.0")))
        bad = subprocess.run([sys.executable, os.path.join(HERE, "merge_checkpoints.py"), "--out", os.path.join(d, "x"), "--weights", "1,2"] + ins,
                             env=env, capture_output=True, text=True)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("2 weights for 3 checkpoints", bad.stderr)


class _Planted:
    """A pickle that runs a command when loaded in full (review t4, F7)."""
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, ("touch %s" % self.marker,))


@unittest.skipIf(torch is None, "torch is not installed")
class PlantedPickleTest(unittest.TestCase):
    """A checkpoint someone else wrote is loaded as data only: a planted
    rank-*.pt is refused, and its code does not run."""

    def plant(self, d, name="rank-0.pt"):
        marker = os.path.join(d, "ran")
        torch.save({"model": {"w": torch.zeros(2)}, "step": 1, "x": _Planted(marker)}, os.path.join(d, name))
        return marker

    def test_merge_refuses_a_planted_pickle(self):
        d = tempfile.mkdtemp()
        ins = []
        for i in range(2):
            p = os.path.join(d, "in%d" % i)
            os.makedirs(p)
            marker = self.plant(p)
            ins.append(p)
        env = dict(os.environ, RANK="0", WORLD_SIZE="1")
        r = subprocess.run([sys.executable, os.path.join(HERE, "merge_checkpoints.py"), "--out", os.path.join(d, "out")] + ins,
                           env=env, capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertFalse(os.path.exists(marker), "the planted pickle ran")

    def test_example_loads_data_only(self):
        d = tempfile.mkdtemp()
        marker = self.plant(d)
        good = os.path.join(d, "good.pt")
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        model(torch.ones(1, 4)).sum().backward()
        opt.step()
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": 3}, good)
        code = ("import sys, train_example as t\n"
                "s = t.load_rank_state(sys.argv[1]); assert s['step'] == 3 and 'momentum_buffer' in s['opt']['state'][0]\n"
                "try:\n    t.load_rank_state(sys.argv[2])\nexcept Exception:\n    sys.exit(0)\nsys.exit('planted pickle loaded')\n")
        env = dict(os.environ, PYTHONPATH=HERE)
        r = subprocess.run([sys.executable, "-c", code, good, os.path.join(d, "rank-0.pt")], env=env, capture_output=True, text=True, cwd=HERE)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(marker), "the planted pickle ran")


if __name__ == "__main__":
    unittest.main()
