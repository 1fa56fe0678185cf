"""The toolkit's imports run one way (issue 49).

Reads every module of ``training/energyflow`` with :mod:`ast` (nothing is
imported) and checks:

* the graph of the imports run when a module loads (module level, class
  bodies included; not function bodies) has no cycle;
* an import inside a function is there only to put off a heavy optional
  dependency (torch, ONNX, h5py, matplotlib, the simulator): what it loads
  must pull one the importing module does not already load, and a comment on
  its line or the lines just above says so;
* no module takes another's private (``_name``) helper, or a name that module
  does not bind itself (a ``__getattr__`` alias kept for old callers);
* nothing in the toolkit imports ``research`` or ``scripts``.

Run as a script it prints the graph, bottom layer first, and the imports
kept inside functions, and exits 1 on a cycle::

    .venv/bin/python training/tests/test_imports.py
"""
from __future__ import annotations

import ast
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

PKG = "energyflow"
PKG_DIR = Path(__file__).resolve().parents[1] / PKG
#: third-party modules an import may put off until a function needs them
HEAVY_OPTIONAL = frozenset({"torch", "onnx", "onnxruntime", "h5py", "matplotlib", "sim", "mujoco"})
#: repository folders the toolkit must never import
FORBIDDEN = frozenset({"research", "scripts"})


@dataclass
class Import:
    module: str                  # the importing module
    line: int
    text: str
    targets: List[str]           # toolkit modules it loads
    external: List[str]          # top-level names of other packages it loads
    names: List[Tuple[str, str]] = field(default_factory=list)  # (toolkit module, name) of ``from M import name``
    in_function: bool = False


@dataclass
class Package:
    files: Dict[str, Path]
    imports: List[Import]
    bound: Dict[str, Set[str]]   # names each module binds at module level

    @property
    def graph(self) -> Dict[str, Set[str]]:
        g: Dict[str, Set[str]] = {m: set() for m in self.files}
        for im in self.imports:
            if not im.in_function:
                g[im.module].update(t for t in im.targets if t != im.module)
        return g

    def externals(self, module: str) -> Set[str]:
        return {e for im in self.imports if im.module == module and not im.in_function for e in im.external}

    def closure(self, module: str) -> Set[str]:
        """The toolkit modules and other packages loaded when ``module`` loads."""
        g, seen, todo = self.graph, {module}, [module]
        while todo:
            for n in g[todo.pop()]:
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return seen | {e for m in seen for e in self.externals(m)}


def module_files(root: Path = PKG_DIR) -> Dict[str, Path]:
    out = {}
    for f in sorted(root.rglob("*.py")):
        parts = list(f.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _walk(node: ast.AST, in_function: bool = False) -> Iterator[Tuple[ast.AST, bool]]:
    for child in ast.iter_child_nodes(node):
        yield child, in_function
        inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from _walk(child, inner)


def _bound_names(tree: ast.Module) -> Set[str]:
    names: Set[str] = set()

    def targets(t: ast.AST) -> None:
        if isinstance(t, ast.Name):
            names.add(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                targets(e)

    def body(stmts: List[ast.stmt]) -> None:
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(s.name)
            elif isinstance(s, ast.Assign):
                for t in s.targets:
                    targets(t)
            elif isinstance(s, (ast.AnnAssign, ast.AugAssign)):
                targets(s.target)
            elif isinstance(s, (ast.Import, ast.ImportFrom)):
                for a in s.names:
                    names.add(a.asname or a.name.split(".")[0])
            elif isinstance(s, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                for part in ("body", "orelse", "finalbody"):
                    body(getattr(s, part, []))
                for h in getattr(s, "handlers", []):
                    body(h.body)
    body(tree.body)
    return names


def read_package(root: Path = PKG_DIR) -> Package:
    files = module_files(root)
    imports: List[Import] = []
    bound: Dict[str, Set[str]] = {}
    for mod, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        bound[mod] = _bound_names(tree)
        is_pkg = path.name == "__init__.py"
        for node, in_fn in _walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            im = Import(mod, node.lineno, ast.unparse(node), [], [], in_function=in_fn)
            if isinstance(node, ast.Import):
                for a in node.names:
                    (im.targets if a.name.split(".")[0] == PKG else im.external).append(
                        a.name if a.name.split(".")[0] == PKG else a.name.split(".")[0])
            else:
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                if src.split(".")[0] != PKG:
                    im.external.append(src.split(".")[0])
                else:
                    im.targets.append(src)
                    for a in node.names:
                        if f"{src}.{a.name}" in files:
                            im.targets.append(f"{src}.{a.name}")
                        else:
                            im.names.append((src, a.name))
            # loading a.b.c loads its packages a.b first (not the importer's own, already loading)
            for t in list(im.targets):
                parts = t.split(".")
                for i in range(2, len(parts)):
                    parent = ".".join(parts[:i])
                    if parent in files and not mod.startswith(parent + ".") and parent != mod:
                        im.targets.append(parent)
            im.targets = [t for t in dict.fromkeys(im.targets) if t in files and t != PKG]
            imports.append(im)
    return Package(files, imports, bound)


def find_cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components with more than one module (or a module importing itself)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    out: List[List[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layers(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Modules by height: layer 0 imports no toolkit module, layer k only lower ones (acyclic graph)."""
    height: Dict[str, int] = {}

    def h(v: str) -> int:
        if v not in height:
            height[v] = 1 + max((h(w) for w in graph[v]), default=-1)
        return height[v]

    for v in graph:
        h(v)
    return [sorted(v for v in graph if height[v] == k) for k in range(max(height.values(), default=-1) + 1)]


def _commented(path: Path, line: int) -> bool:
    """A comment on the import's line, or on the comment/import lines just above it."""
    lines = path.read_text().splitlines()
    if "#" in lines[line - 1]:
        return True
    i = line - 2
    while i >= 0:
        s = lines[i].strip()
        if s.startswith("#"):
            return True
        if not (s.startswith("import ") or s.startswith("from ")):
            return False
        i -= 1
    return False


def in_function_problems(pkg: Package) -> List[str]:
    out = []
    for im in pkg.imports:
        if not im.in_function:
            continue
        where = f"{pkg.files[im.module].relative_to(PKG_DIR.parent)}:{im.line} `{im.text}`"
        have = pkg.closure(im.module)
        before = len(out)
        for t in im.targets:
            gained = (pkg.closure(t) - have) & HEAVY_OPTIONAL
            if not gained:
                out.append(f"{where}: {t} pulls no heavy optional dependency {im.module} lacks: import it at module level")
        for e in im.external:
            if e not in HEAVY_OPTIONAL:
                out.append(f"{where}: {e} is not a heavy optional dependency: import it at module level")
            elif e in have:
                out.append(f"{where}: {im.module} already loads {e} at module level")
        if len(out) == before and not _commented(pkg.files[im.module], im.line):
            out.append(f"{where}: say in a comment which heavy optional dependency this defers")
    return out


def name_problems(pkg: Package) -> List[str]:
    out = []
    for im in pkg.imports:
        where = f"{pkg.files[im.module].relative_to(PKG_DIR.parent)}:{im.line} `{im.text}`"
        for e in im.external:
            if e in FORBIDDEN:
                out.append(f"{where}: the toolkit never imports {e}/")
        for src, name in im.names:
            if src not in pkg.files or name == "*":
                continue
            if name.startswith("_") and not name.startswith("__"):
                out.append(f"{where}: {name} is private to {src}: make it public there")
            elif name not in pkg.bound[src]:
                out.append(f"{where}: {src} does not define {name} (an alias for old callers): "
                           "import it from where it is defined")
    return out


# ---------------------------------------------------------------------------
def test_no_import_cycle() -> None:
    cycles = find_cycles(read_package().graph)
    assert not cycles, "import cycles (module level): " + "; ".join(" <-> ".join(c) for c in cycles)


def test_imports_inside_functions_only_defer_heavy_optional_dependencies() -> None:
    problems = in_function_problems(read_package())
    assert not problems, "\n".join(problems)


def test_no_private_alias_or_research_imports() -> None:
    problems = name_problems(read_package())
    assert not problems, "\n".join(problems)


def test_the_check_sees_a_reintroduced_cycle(tmp_path: Path) -> None:
    """The checker itself: an upward import at module level (the old config -> distill) is a cycle."""
    root = tmp_path / PKG
    shutil.copytree(PKG_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    cfg = root / "config.py"
    cfg.write_text(cfg.read_text() + "\nfrom .distill import Teacher\n")
    cycles = find_cycles(read_package(root).graph)
    assert any({"energyflow.config", "energyflow.distill"} <= set(c) for c in cycles), cycles


def test_the_check_sees_a_hidden_import() -> None:
    pkg = read_package()
    # a toolkit module imported inside a function when it pulls no heavy dependency is refused
    fake = Import("energyflow.rollout", 1, "from .stats import wilson", ["energyflow.stats"], [], in_function=True)
    assert in_function_problems(Package(pkg.files, pkg.imports + [fake], pkg.bound))


def test_old_import_paths_keep_working() -> None:
    """Names that moved down (policy, checkpoint loading, schedules, the DDIM sampler, Wilson's interval)
    or into subpackages still import from where they were."""
    import importlib
    import warnings

    old = {"energyflow.train": ["Policy", "load_checkpoint_policy", "EMA", "lr_lambda"],
           "energyflow.distill": ["record", "Teacher"],
           "energyflow.diffusion": ["NUM_TRAIN_TIMESTEPS", "betas_for_alpha_bar", "ddpm_alphas_cumprod",
                                    "schedule_manifest", "OrtEps", "TorchEps", "ddim_sample", "ddim_coefficients",
                                    "sample_diffusion_bundle", "NoiseUNet"],
           "energyflow.rollout": ["wilson", "load_planner"],
           "energyflow.model": ["EnergyUNet", "DenoiserEnergy", "VectorUNet", "UNetBackbone", "energy_model",
                                "recompute_spectral_norm", "bake_spectral_norm", "GroupNormVJP", "Conv1dBlock"],
           "energyflow.state_term": ["StateTermConfig", "fit_state_term", "step_conds", "export_state_energy",
                                     "GRAPH_FILE", "SHAPE_OPS", "dsm_loss", "state_term_main"],
           "energyflow.export": ["graph_ops", "ALLOWED_OPS", "export_energy_grad"]}
    for mod, names in old.items():
        m = importlib.import_module(mod)
        missing = [n for n in names if not hasattr(m, n)]
        assert not missing, f"{mod} lost {missing}"
    from energyflow import export
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        from energyflow.bundle import write_bundle
    assert write_bundle is export.write_bundle and any(issubclass(x.category, DeprecationWarning) for x in w)


def main() -> int:
    pkg = read_package()
    g = pkg.graph
    cycles = find_cycles(g)
    print(f"module-level imports of {PKG_DIR.relative_to(PKG_DIR.parents[1])} ({len(g)} modules):")
    if cycles:
        for c in cycles:
            print("CYCLE:", " <-> ".join(c))
        for m in sorted(g):
            print(f"  {m} -> {', '.join(sorted(g[m])) or '-'}")
    else:
        for k, layer in enumerate(layers(g)):
            print(f"layer {k}:")
            for m in layer:
                print(f"  {m} -> {', '.join(sorted(g[m])) or '-'}")
        print("no cycle")
    kept = [im for im in pkg.imports if im.in_function]
    print(f"imports inside functions: {len(kept)}")
    for im in kept:
        print(f"  {im.module}:{im.line} {im.text}")
    problems = in_function_problems(pkg) + name_problems(pkg)
    for p in problems:
        print("PROBLEM:", p)
    return 1 if cycles or problems else 0


if __name__ == "__main__":
    sys.exit(main())
