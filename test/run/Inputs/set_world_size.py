"""Overwrites the world_size of a Braid plan (FlatBuffers) in place.

    set_world_size.py PLAN.bplan N

A one-field corruption, as a bit flip in storage or transfer would make
(world_size 2 -> 65538 flips bit 16): every other check of the plan still
passes when the device groups tile N. The field must be stored (a plan for
one rank may leave it at its default and is refused here).
"""
import struct, sys

path, value = sys.argv[1], int(sys.argv[2])
data = bytearray(open(path, "rb").read())
root = struct.unpack_from("<I", data, 0)[0]           # uoffset to the root table
vtable = root - struct.unpack_from("<i", data, root)[0]
vtable_size = struct.unpack_from("<H", data, vtable)[0]
field = 1                                             # Plan.world_size
entry = 4 + 2 * field
if entry + 2 > vtable_size:
    sys.exit("world_size is not stored in " + path)
offset = struct.unpack_from("<H", data, vtable + entry)[0]
if offset == 0:
    sys.exit("world_size is not stored in " + path)
struct.pack_into("<i", data, root + offset, value)
open(path, "wb").write(bytes(data))
