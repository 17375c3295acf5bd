"""Start the shop server from the mounted code without importing the whole package.

``agentunit_gym/__init__.py`` registers envs (it imports gymnasium, which the image does
not have); the shop server needs only ``agentunit_gym.backends.shop`` and ``errors``. So
the package is entered as a bare namespace over the mounted folder, then the server's
``main`` runs.
"""

import runpy
import sys
import types

CODE = "/opt/agentunit/code"

sys.path.insert(0, CODE)
package = types.ModuleType("agentunit_gym")
package.__path__ = [f"{CODE}/agentunit_gym"]
sys.modules["agentunit_gym"] = package
sys.dont_write_bytecode = True  # the code is mounted read-only
runpy.run_module("agentunit_gym.backends.shop.server", run_name="__main__")
