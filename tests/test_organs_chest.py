"""The real chest slab as training data (issue #47): read through its RTSTRUCT, shown the way
the generator shows it, the heart kept as TotalSegmentator v1's five structures."""

from __future__ import annotations

import numpy as np
import pytest

from radspatial.core.labels import TOTALSEG_V1_HEART

organs_data = pytest.importorskip("radspatial.training.organs_data")


@pytest.fixture(scope="module")
def chest():
    return organs_data.chest_slab(organs_data.shared_data())


def test_chest_slab_is_recorded_as_model_output_with_every_file_hashed(chest):
    assert chest.name == "patient_chest" and chest.ct.shape == (512, 512, 20)
    assert chest.source["labels"].startswith("TotalSegmentator v1 model output")
    assert len([k for k in chest.source if k.startswith("ct_") and k.endswith("_sha256")]) == 20
    assert chest.source["seg"].endswith("rt-struct-test-data-81-100.dcm")
    present = set(np.unique(chest.seg).tolist())
    assert set(TOTALSEG_V1_HEART) <= present  # all five heart structures, under their own ids


def test_chest_slab_rendered_slice_keeps_the_patients_sides(chest):
    """On the displayed slice (the generator's geometry: the patient's left on the image's
    right, anterior up) the left ventricle lies right of the inferior vena cava and of the
    body's centre, the heart in front of the vertebra: a flipped or transposed reader fails."""
    z = 10
    lab = organs_data.render_lab(chest.seg, z, chest.spacing, 128)
    hu = organs_data.render_hu(chest.ct, z, chest.spacing, 128)

    def centre(label_id: int) -> np.ndarray:
        rc = np.argwhere(lab == label_id)
        assert len(rc), label_id
        return rc.mean(axis=0)  # (row, column)

    lv, ivc, spine = centre(120), centre(63), centre(26)
    body_cols = np.argwhere(hu > -500)[:, 1]
    assert lv[1] > body_cols.mean() + 5 and lv[1] > ivc[1] + 10
    assert lv[0] < spine[0] - 10  # anterior is up
    assert np.median(hu[lab == 120]) > 0  # labels on blood / muscle, not on lung


def test_chest_classes_join_the_class_list_under_their_v1_names(chest):
    from radspatial.training.organs_train import class_list

    (_, labs), sources = organs_data.banks([chest], 64)
    names = dict(class_list([labs]))
    assert {names[i] for i in TOTALSEG_V1_HEART} == set(TOTALSEG_V1_HEART.values())
    assert names[15] == "esophagus" and sources[0]["slices"] == 20
    assert "gstt_thorax" not in organs_data.held_out(("a", "c", "chest"))


@pytest.fixture(scope="module")
def tiny_chest_model(tmp_path_factory):
    """Two steps on the chest slab and patient C: a loadable model folder (the network is
    untrained; its config.json and class map are what these tests read)."""
    from radspatial.training.organs_train import OrgansConfig, train_organs

    out = tmp_path_factory.mktemp("chest_model")
    config = OrgansConfig(
        n_phantoms=0, size=64, steps=2, batch_size=2, threads=1, volumes=("c", "chest")
    )
    record = train_organs(out, config, progress=False)
    return out, record


def test_model_folder_records_its_real_levels_and_structures(tiny_chest_model):
    _, record = tiny_chest_model
    levels = record["data"]["real"]["levels"]
    assert levels["vertebrae"]["patient_chest"][:2] == ["T7", "T8"]
    assert levels["vertebrae"]["patient_c"] == [] and levels["span"] == ["T7", "T12"]
    seen = levels["structures_real"]
    assert seen["heart_ventricle_left"] >= 10 and seen["heart"] == 20  # the whole, from parts
    assert "gluteus_maximus_left" not in seen
    plaus = record["data"]["real"]["plausibility"]
    assert plaus[51]["n_slices"] == 20  # the heart's range: its parts together


def test_heart_resolves_to_the_union_of_its_parts(tiny_chest_model):
    from radspatial.agent.localizers.organs.organs_names import resolve
    from radspatial.agent.pipeline.types import Ref
    from radspatial.nets import unet

    model = unet.UNetModel(tiny_chest_model[0])
    parts = model.composites[51]
    assert sorted(model.classes[i][1] for i in parts) == sorted(TOTALSEG_V1_HEART.values())
    assert resolve(Ref(name="heart"), model) == (51, "name (the union of its parts)")
    assert resolve(Ref(name="left heart ventricle"), model)[0] == 120
    assert model.unseen_in_real(51) is None and model.unseen_in_real(120) is None


def test_structures_only_drawn_are_not_answered_with_the_reason(tiny_chest_model):
    from radspatial.nets import unet

    model = unet.UNetModel(tiny_chest_model[0])
    model.levels = {**model.levels, "structures_real": {"liver": 3}}
    why = model.unseen_in_real(120)
    assert why is not None and "heart_ventricle_left" in why and "T7-T12" in why
    assert model.unseen_in_real(5) is None  # liver: seen in real texture
    model.levels = None  # a model folder from before the record: no such rule
    assert model.unseen_in_real(120) is None


def test_merge_parts_takes_the_union_and_sums_the_probabilities():
    from radspatial.agent.localizers.organs.organs import merge_parts
    from radspatial.nets import unet

    probs = np.zeros((4, 4, 4), np.float32)
    probs[0], probs[1, :, :2], probs[2, :, 2:] = 0.2, 0.5, 0.6
    labels = np.array([[1, 1, 2, 3]] * 4)
    votes = np.stack([labels, labels[:, ::-1]])
    merged, v = merge_parts(unet.Prediction(probs, labels), votes, (1, 2))
    assert (merged.labels == np.array([[1, 1, 1, 3]] * 4)).all()
    assert np.allclose(merged.probs[1], probs[1] + probs[2]) and (v[1] == [[3, 1, 1, 1]] * 4).all()
    assert np.allclose(merged.probs[3], probs[3])  # other classes untouched
