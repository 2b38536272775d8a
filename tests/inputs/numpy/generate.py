# Writes the .npy and .npz files beside this script with numpy itself, so that the readers are
# tested on files from the format's own writer (the header padding, the dtype strings, and the
# zip64 extra field np.savez puts in every local header beside valid 32-bit sizes).
# Run with a python3 that has numpy: python3 generate.py
# The values are chosen to be exact in their dtypes; tensor_source_test.cpp spells them out.
import numpy as np

c_fc_weight = np.array([[0.5, -1.25, 2.0], [3.0, 0.125, -4.5]], dtype="<f4")
c_fc_bias = np.array([1.5, -0.75, 0.1], dtype="<f8")
wte = np.array([[1.0, 2.0], [-0.5, 65504.0], [2.0**-24, 0.0]], dtype="<f2")

np.save("c_fc_weight.npy", c_fc_weight)
np.save("fortran_order.npy", np.asfortranarray(c_fc_weight))
np.save("big_endian.npy", c_fc_bias.astype(">f8"))
np.save("int64.npy", np.arange(6, dtype="<i8"))
np.save("object.npy", np.array([1, "one"], dtype=object), allow_pickle=True)

arrays = {"h.0.mlp.c_fc.weight": c_fc_weight, "h.0.mlp.c_fc.bias": c_fc_bias, "wte": wte}
np.savez("stored.npz", **arrays)
np.savez_compressed("compressed.npz", **arrays)
