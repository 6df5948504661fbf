"""Built-in env families; importing this registers their ids (the env modules load lazily)."""

from palaestra.envs import code as code
from palaestra.envs import games as games
from palaestra.envs import math as math
from palaestra.envs import search as search
from palaestra.envs import sql as sql
from palaestra.envs import tools as tools
