import sys
from pathlib import Path

# test helper modules (reference_recipe, storehelpers, ...) import by plain name
sys.path.insert(0, str(Path(__file__).resolve().parent))
