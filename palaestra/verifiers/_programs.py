"""The programs code grading runs in the sandbox (see ``palaestra/verifiers/code.py``).

``HARNESS`` runs only trusted code (the problem's prompt and tests, never the candidate):
every call to a candidate function is answered from a table of results (plain data) or
recorded as missing, asserts become calls that record the verdict, and it prints one JSON
verdict per test: passed, the kind of error and the candidate calls the test made (never
the test's message, which may hold an expected value), or the calls still missing.
``CALLER`` runs the candidate: it defines the candidate's functions and calls them on the
recorded arguments (``Class.method`` names a method of a fresh instance, as LeetCode's
judge calls ``Solution().method``), printing ``"ready"`` once the candidate's code has
loaded, then each result as plain data, a line each, as it comes. Neither program sees the
other's data: the candidate never sees a test or an expected value. ``CHECKER`` runs a
problem's checker (trusted) on one output of the candidate, given as data.
"""

from pathlib import Path

PLAIN_SOURCE = Path(__file__).with_name("_plain.py").read_text()

HARNESS = (
    PLAIN_SOURCE
    + r'''
import ast, builtins, io, random, sys

SPEC = json.load(open("harness.json"))
TABLE = SPEC["table"]


class Hole:
    """Stands for a result not known yet; permissive so that a test keeps recording calls."""

    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        return self

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __hash__(self):
        return 0

    def __bool__(self):
        return True

    def __len__(self):
        return 0

    def __iter__(self):
        return iter(())

    def __getitem__(self, key):
        return self

    def __int__(self):
        return 0

    __index__ = __int__

    def __float__(self):
        return 0.0

    def __str__(self):
        return ""


def _operator(name):
    return lambda self, *args: self


for _name in ("add radd sub rsub mul rmul truediv rtruediv floordiv rfloordiv mod rmod pow "
              "rpow neg pos abs round and rand or ror xor rxor lshift rshift").split():
    setattr(Hole, f"__{_name}__", _operator(_name))
for _name in ("lt", "le", "gt", "ge", "contains"):
    setattr(Hole, f"__{_name}__", lambda self, other: True)


class Test:
    """State of one test: whether it used an unknown result, the calls still missing, the
    calls made (for the failure report) and the exception a call of the candidate raised."""

    def __init__(self):
        self.incomplete = False
        self.missing = []
        self.calls = 0
        self.keys = []
        self.raised = None

    def stub(self, name):
        def call(*args, **kwargs):
            self.calls += 1
            try:
                key = dumps([name, list(args), kwargs])
            except (Unencodable, TypeError, ValueError):
                self.incomplete = True  # an argument depends on a result not known yet
                return Hole()
            self.keys.append(key)
            if key not in TABLE:
                self.incomplete = True
                self.missing.append(key)
                return Hole()
            result = TABLE[key]
            if "raised" in result:
                kind = getattr(builtins, result["raised"][0], None)
                if not (isinstance(kind, type) and issubclass(kind, Exception)):
                    kind = RuntimeError
                self.raised = kind(result["raised"][1])
                raise self.raised
            return decode(result["value"])

        return call

    def check(self, condition, message=None):
        if not self.incomplete and not condition:
            raise AssertionError(message) if message is not None else AssertionError()


class Asserts(ast.NodeTransformer):
    """``assert c, m`` -> ``__check__(c, m)``: a test with unknown results keeps running."""

    def visit_Assert(self, node):
        args = [node.test] + ([node.msg] if node.msg is not None else [])
        call = ast.Call(ast.Name("__check__", ast.Load()), args, [])
        return ast.copy_location(ast.Expr(call), node)


def free_names(tree):
    loaded, stored = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else stored).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stored.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            stored.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            stored.add(node.arg)
    return loaded - stored - set(dir(builtins))


def prompt_namespace():
    namespace = {"__name__": "__test__"}
    try:
        exec(compile(SPEC["prompt"], "<prompt>", "exec"), namespace)
    except BaseException:
        namespace = {"__name__": "__test__"}
    return namespace


def run(source):
    tree = ast.parse(source)
    namespace = prompt_namespace()
    test = Test()
    proxied = free_names(tree) - set(namespace)
    if SPEC["entry_point"]:
        proxied.add(SPEC["entry_point"])
    namespace.update({name: test.stub(name) for name in proxied}, __check__=test.check)
    random.seed(0)
    tree = ast.fix_missing_locations(Asserts().visit(tree))
    try:
        exec(compile(tree, "<test>", "exec"), namespace)
        failed = None
    except BaseException as exc:
        failed = exc
    calls = list(dict.fromkeys(test.keys))
    if test.incomplete:
        return {"missing": test.missing, "calls": calls}
    if not test.calls:
        return {"error": "the test never calls the candidate, so it tests nothing"}
    if failed is None:
        return {"error": None}
    # Never the test's own message: it may hold the expected value. An exception of the
    # candidate that reached the test carries the candidate's own words.
    verdict = {"error": type(failed).__name__, "calls": calls}
    if failed is test.raised:
        verdict["raised"] = [type(failed).__name__, str(failed)]  # capped by the grader
    return verdict


_stdout = sys.stdout
sys.stdout = io.StringIO()
verdicts = [run(source) for source in SPEC["tests"]]
sys.stdout = _stdout
print(json.dumps(verdicts))
'''
)

CALLER = (
    PLAIN_SOURCE
    + r"""
import io, os, sys, traceback

CALLS = json.load(open("calls.json"))
_out = os.dup(1)
sys.stdout = io.StringIO()


def _send(reply):
    data = memoryview((json.dumps(reply, separators=(",", ":")) + "\n").encode())
    while data:
        data = data[os.write(_out, data) :]


_namespace = {"__name__": "solution"}
if os.path.exists("preamble.py"):
    exec(compile(open("preamble.py").read(), "preamble.py", "exec", dont_inherit=True), _namespace)
# dont_inherit: the candidate runs as plain Python, whatever future flags ran this program
exec(compile(open("solution.py").read(), "solution.py", "exec", dont_inherit=True), _namespace)
_send("ready")


def _function(name):
    owner, _, method = name.rpartition(".")
    if owner:  # a LeetCode-style method: a fresh instance per call
        return getattr(_namespace[owner](), method)
    return _namespace[name]


def _text(exc):
    try:
        text = str(exc)[:150]
    except BaseException:
        text = ""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "solution.py"]
    if frames:
        text += f" (line {frames[-1].lineno}: {(frames[-1].line or '').strip()[:80]})"
    return text


for _index, _key in enumerate(CALLS):
    _name, _args, _kwargs = decode(json.loads(_key))
    try:
        _reply = {"value": encode(_function(_name)(*_args, **_kwargs))}
    except Unencodable as _exc:
        _reply = {"raised": ["TypeError", f"the result is not plain data ({_exc})"]}
    except BaseException as _exc:
        _reply = {"raised": [type(_exc).__name__, _text(_exc)]}
    sys.stdout = io.StringIO()
    try:
        _send([_index, _reply])
    except (ValueError, TypeError, RecursionError) as _exc:
        _send([_index, {"raised": ["ValueError", f"the result cannot be sent ({_exc})"[:200]]}])
"""
)

CHECKER = r"""
import io, json, sys

_out, sys.stdout = sys.stdout, io.StringIO()
_namespace = {"__name__": "checker"}
exec(compile(open("checker.py").read(), "checker.py", "exec", dont_inherit=True), _namespace)
_case = json.load(open("case.json"))
_verdict = bool(_namespace["check"](_case["input"], _case["output"], _case["expected"]))
sys.stdout = _out
print(json.dumps(_verdict))
"""
