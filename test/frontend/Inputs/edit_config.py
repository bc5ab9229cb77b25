"""Prints a config.json edited from the command line, for lit tests:

  edit_config.py BASE.json key=JSON ... [-key ...]

`key=JSON` sets a top-level field (a.b=JSON sets field b of object a),
`-key` deletes one. Values are JSON: 5, true, null, "str", {"a": 1}.
"""
import json
import sys

config = json.load(open(sys.argv[1]))
for arg in sys.argv[2:]:
    if arg.startswith("-"):
        config.pop(arg[1:], None)
        continue
    key, value = arg.split("=", 1)
    target = config
    *path, last = key.split(".")
    for part in path:
        target = target.setdefault(part, {})
    target[last] = json.loads(value)
print(json.dumps(config, indent=1))
