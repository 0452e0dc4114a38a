"""The identity of a measurement for --resume: (model key, mode id, requested precision, repeat)."""
from edgeattn.sweep import results


def _row(repeat, precision="fp32", mode=2):
    return {"model_key": "/m/a.onnx", "mode_id": mode, "precision_requested": precision, "repeat": repeat}


def test_each_repeat_is_its_own_finished_measurement(tmp_path):
    store = results.ResultStore(str(tmp_path))
    store.rows = [_row(1), _row(2), _row(1, "fp16"), _row(1, mode=0)]
    assert results.row_key(_row(3)) == ("/m/a.onnx", 2, "fp32", 3)
    assert store.done_keys() == {("/m/a.onnx", 2, "fp32", 1), ("/m/a.onnx", 2, "fp32", 2),
                                 ("/m/a.onnx", 2, "fp16", 1), ("/m/a.onnx", 0, "fp32", 1)}
