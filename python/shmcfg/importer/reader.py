# SPDX-License-Identifier: MIT
"""Reading a config module's source, parsed with `ast` and never executed,
and the evaluation of what can be told without running it (literals,
folds, annotations, Config(...), os.environ.get): ModuleReader turns each
assignment into an Option or one `skipped` line.
"""

import ast
import copy
import inspect
import io
import tokenize

from .files import SOURCE_MAX, read_regular
from .library import check_option
from .model import (COMPILE_IGNORED_MARKER, CONFIG_EXTRA, CONFIG_POSITIONAL, ENV_FUNCS,
                    MUTATING_METHODS, Computed, InputError, Option, Skip, kind_of, normalize,
                    show)

def dotted(node):
    """'os.environ.get' for an Attribute/Name chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def short(text):
    """A text cut to 60 characters, for messages."""
    return text if len(text) <= 60 else text[:57] + "..."


def src(node):
    """Source text of a node, for messages."""
    if hasattr(ast, "unparse"):
        try:
            text = ast.unparse(node)
        except Exception:  # pragma: no cover - unparse is total in practice
            text = type(node).__name__
    else:  # Python 3.8
        text = dotted(node) or type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


def subscript_args(node):
    sl = node.slice
    index = getattr(ast, "Index", None)
    if index is not None and isinstance(sl, index):  # Python 3.8
        sl = sl.value
    if isinstance(sl, ast.Tuple):
        return list(sl.elts)
    return [sl]


def bounded(v):
    """A constant, unless an int past 64 bits: no int option holds it, and
    str() of 0x + 5000 f's raises ValueError (Python's digit limit); raise Skip."""
    if kind_of(v) == "int" and v.bit_length() > INT_BITS:
        raise Skip("an int constant of %d bits is out of the 64-bit range of an int option"
                   % v.bit_length())
    return v


def const_value(node):
    """A Constant (or -Constant) as a Python value; raise Skip."""
    if isinstance(node, ast.Constant):
        return bounded(node.value)
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd))
            and isinstance(node.operand, ast.Constant)
            and kind_of(node.operand.value) in ("int", "float")):
        v = bounded(node.operand.value)
        return -v if isinstance(node.op, ast.USub) else v
    raise Skip("%s is not a constant" % src(node))


class AnnType:
    def __init__(self, type_, nullable=False, choices=None):
        self.type, self.nullable, self.choices = type_, nullable, choices


SCALAR_ANN = {"bool": "bool", "int": "int", "float": "float", "str": "str"}
SEQ_ANN = {"list": "list", "List": "list", "Sequence": "list", "MutableSequence": "list",
           "set": "set", "Set": "set", "AbstractSet": "set", "MutableSet": "set"}


def parse_annotation(node):
    """An annotation as AnnType; raise Skip for anything not a shmcfg type."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            inner = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            raise Skip("annotation %r does not parse" % node.value)
        return parse_annotation(inner)
    if isinstance(node, ast.Constant) and node.value is None:
        return AnnType(None, True)
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = (dotted(node) or "").split(".")[-1]
        if name in SCALAR_ANN:
            return AnnType(SCALAR_ANN[name])
        if name in SEQ_ANN:
            return AnnType(SEQ_ANN[name])
        if name == "NoneType":
            return AnnType(None, True)
        raise Skip("annotation %s is not a shmcfg type" % src(node))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return union([node.left, node.right], node)
    if isinstance(node, ast.Subscript):
        base = (dotted(node.value) or "").split(".")[-1]
        args = subscript_args(node)
        if base == "Optional" and len(args) == 1:
            t = parse_annotation(args[0])
            t.nullable = True
            return t
        if base == "Union":
            return union(args, node)
        if base in ("Annotated", "Final", "ClassVar"):
            return parse_annotation(args[0])
        if base in SEQ_ANN and len(args) == 1:
            item = args[0]
            iname = (dotted(item) or "") if isinstance(item, (ast.Name, ast.Attribute)) else ""
            if iname.split(".")[-1] != "str":
                raise Skip("annotation %s: shmcfg lists and sets hold strings" % src(node))
            return AnnType(SEQ_ANN[base])
        if base == "Literal":
            values = [const_value(a) for a in args]
            nullable = None in values
            values = [v for v in values if v is not None]
            kinds = {kind_of(v) for v in values}
            if not values:
                raise Skip("annotation %s has no values" % src(node))
            if kinds == {"bool"}:
                return AnnType("bool", nullable)
            if len(kinds) != 1 or kinds - {"str", "int", "float"}:
                raise Skip("annotation %s mixes types" % src(node))
            return AnnType(kinds.pop(), nullable, values)
    raise Skip("annotation %s is not a shmcfg type" % src(node))


def union(members, node):
    types = [parse_annotation(m) for m in members]
    nullable = any(t.nullable for t in types)
    real = [t for t in types if t.type is not None]
    if len(real) != 1:
        raise Skip("annotation %s mixes types" % src(node))
    t = real[0]
    t.nullable = t.nullable or nullable
    return t


class Val:
    """An evaluated right-hand side: a value, its type and env variables."""

    def __init__(self, value, type_=None, nullable=False, env=None):
        self.value = value
        self.type = type_ if type_ is not None else kind_of(value)
        self.nullable = nullable or value is None
        self.env = env or []


INT_BITS = 64  # an int option holds an int64: no fold needs more than twice that


def fold_binop(node):
    left, right = literal(node.left), literal(node.right)
    if kind_of(left) not in ("int", "float") or kind_of(right) not in ("int", "float"):
        raise Computed("%s is not a numeric constant expression" % src(node))
    op = type(node.op)
    # bounded by what it produces: an operand or a power past 64 bits is no
    # option's value, and (9**128)**128... would take minutes and gigabytes
    big = [v for v in (left, right) if isinstance(v, int) and v.bit_length() > INT_BITS]
    if big or (op is ast.Pow and isinstance(left, int) and isinstance(right, int) and right > 0 and
               abs(left) > 1 and (abs(left).bit_length() - 1) * right > 2 * INT_BITS):
        raise Computed("%s is out of the 64-bit range of an int option" % src(node)[:80])
    try:
        if op is ast.Add:
            return left + right
        if op is ast.Sub:
            return left - right
        if op is ast.Mult:
            return left * right
        if op is ast.Div:
            return left / right
        if op is ast.FloorDiv:
            return left // right
        if op is ast.Mod:
            return left % right
        if op is ast.Pow and abs(right) <= 128:
            v = left ** right
            if isinstance(v, complex):  # (-8) ** 0.5: no shmcfg type, no c_value() syntax
                raise Computed("%s is a complex number, not a real one" % src(node))
            return v
        if op in (ast.LShift, ast.RShift, ast.BitOr, ast.BitAnd) and \
                isinstance(left, int) and isinstance(right, int) and 0 <= right <= 128:
            return {ast.LShift: lambda: left << right, ast.RShift: lambda: left >> right,
                    ast.BitOr: lambda: left | right, ast.BitAnd: lambda: left & right}[op]()
    except (ArithmeticError, ValueError):
        pass
    raise Computed("%s is not a constant the importer evaluates" % src(node))


def literal(node):
    """A literal expression as a Python value; raise Skip."""
    if isinstance(node, ast.Constant):
        v = bounded(node.value)
        if kind_of(v) in ("bool", "int", "float", "str") or v is None:
            return v
        raise Skip("%s constant is not a shmcfg value" % type(v).__name__)
    if isinstance(node, ast.UnaryOp):
        v = literal(node.operand)
        if isinstance(node.op, ast.Not) and isinstance(v, bool):
            return not v
        if isinstance(node.op, (ast.USub, ast.UAdd)) and kind_of(v) in ("int", "float"):
            return -v if isinstance(node.op, ast.USub) else v
        raise Skip("%s is not a literal" % src(node))
    if isinstance(node, ast.BinOp):
        return fold_binop(node)
    if isinstance(node, (ast.List, ast.Set)):
        items = [literal(e) for e in node.elts]
        for item in items:
            if not isinstance(item, str):
                raise Skip("%s holds %s; shmcfg lists and sets hold strings"
                           % ("list" if isinstance(node, ast.List) else "set", show(item)))
        return items if isinstance(node, ast.List) else set(items)
    if isinstance(node, ast.Call) and dotted(node.func) in ("set", "list") and not node.keywords:
        ctor = dotted(node.func)
        if not node.args:
            return set() if ctor == "set" else []
        if len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple, ast.Set)):
            items = literal(ast.List(elts=node.args[0].elts, ctx=ast.Load()))
            return set(items) if ctor == "set" else list(items)
    if isinstance(node, ast.Tuple):
        raise Skip("a tuple is not a shmcfg type")
    if isinstance(node, (ast.Dict, ast.DictComp)):
        raise Skip("a dict is not a shmcfg type")
    if isinstance(node, ast.Lambda):
        raise Skip("a lambda is not a shmcfg value")
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        raise Computed("a comprehension is not a literal")
    if isinstance(node, ast.JoinedStr):
        raise Computed("an f-string is not a literal")
    if isinstance(node, ast.Name):
        raise Computed("value is the name %s, not a literal" % node.id)
    if isinstance(node, ast.Attribute):
        raise Computed("value %s is not a literal" % src(node))
    if isinstance(node, ast.Call):
        raise Computed("call to %s() is not understood" % (dotted(node.func) or src(node.func)))
    raise Computed("%s is not a literal" % src(node))


def env_get(node):
    """(VAR, fallback node or None) for os.environ.get(VAR[, fallback]), else None."""
    if not isinstance(node, ast.Call) or dotted(node.func) not in ENV_FUNCS:
        return None
    args = list(node.args)
    kws = {kw.arg: kw.value for kw in node.keywords}
    if None in kws:
        return None
    if "key" in kws and not args:
        args.append(kws.pop("key"))
    if "default" in kws and len(args) == 1:
        args.append(kws.pop("default"))
    if kws or not 1 <= len(args) <= 2:
        return None
    if not (isinstance(args[0], ast.Constant) and isinstance(args[0].value, str)):
        raise Skip("environment variable name %s is not a constant" % src(args[0]))
    return args[0].value, (args[1] if len(args) == 2 else None)


def env_fallback(var, node):
    if node is None:
        return None
    try:
        return literal(node)
    except Computed:
        raise Computed("fallback %s of os.environ.get(%r) is not a literal" % (src(node), var),
                       env=[var])
    except Skip:
        raise Skip("fallback %s of os.environ.get(%r) is not a literal" % (src(node), var))


def evaluate(node, helpers=None):
    """The right-hand side of an assignment as a Val; raise Skip (Computed
    for a value Python computes). `helpers`: the module's functions of no
    arguments that return one expression (name: the expression), so that
    `x = f()` reads as that expression (`def f(): return
    get_tristate_env("X")`)."""
    if helpers and isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and not node.args and not node.keywords and node.func.id in helpers:
        try:
            return evaluate(helpers[node.func.id])
        except Skip:
            pass  # a call the importer does not follow: computed, below
    # os.environ.get("X", "0") == "1"  (or "1" == os.environ.get(...))
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = node.left, node.comparators[0]
        e = env_get(left)
        other = right
        if e is None:
            e = env_get(right)
            other = left
        if e is not None:
            var, fb = e
            if not (isinstance(node.ops[0], ast.Eq) and isinstance(other, ast.Constant)
                    and other.value == "1"):
                raise Skip("only os.environ.get(VAR) == \"1\" is understood, not %s" % src(node))
            return Val(computed_as(lambda: env_fallback(var, fb), "bool") == "1", "bool",
                       env=[var])
        raise Computed("comparison %s is not a literal" % src(node))
    e = env_get(node)
    if e is not None:
        var, fb = e
        v = computed_as(lambda: env_fallback(var, fb), "str")
        if v is not None and not isinstance(v, str):
            raise Skip("os.environ.get(%r, %s) mixes str and %s" % (var, show(v), kind_of(v)))
        return Val(v, "str", nullable=v is None, env=[var])
    if isinstance(node, ast.Call) and dotted(node.func) in ("int", "float", "str", "bool") \
            and len(node.args) == 1 and not node.keywords:
        e = env_get(node.args[0])
        if e is not None:
            conv = dotted(node.func)
            var, fb = e
            if conv == "bool":
                raise Skip("bool(os.environ.get(%r, ...)) is true for any non-empty text, "
                           "\"0\" included" % var)
            v = computed_as(lambda: env_fallback(var, fb), conv)
            if v is None:
                raise Skip("%s(os.environ.get(%r)) has no default" % (conv, var))
            try:
                v = {"int": int, "float": float, "str": str}[conv](v)
            except (TypeError, ValueError):
                raise Skip("%s(%s) fails" % (conv, short(show(v))))
            if conv == "int" and v.bit_length() > INT_BITS:
                raise Skip("int(os.environ.get(%r, ...)) default of %d bits is out of the "
                           "64-bit range of an int option" % (var, v.bit_length()))
            return Val(v, conv, env=[var])
    # torch.utils._config_module.get_tristate_env("X", default=None)
    if isinstance(node, ast.Call) and (dotted(node.func) or "").split(".")[-1] == "get_tristate_env":
        args = list(node.args)
        for kw in node.keywords:
            if kw.arg == "default" and len(args) == 1:
                args.append(kw.value)
            else:
                raise Skip("get_tristate_env() argument %s is not understood" % kw.arg)
        if not 1 <= len(args) <= 2 or not (isinstance(args[0], ast.Constant)
                                           and isinstance(args[0].value, str)):
            raise Skip("get_tristate_env() arguments are not understood")
        try:
            v = literal(args[1]) if len(args) == 2 else None
        except Computed as c:
            c.env, c.type, c.nullable = [args[0].value], "bool", True
            raise
        if v is not None and not isinstance(v, bool):
            raise Skip("get_tristate_env() default %s is not a bool" % show(v))
        return Val(v, "bool", nullable=True, env=[args[0].value])
    return Val(literal(node))


def computed_as(fn, type_):
    """fn(), whose Computed (a fallback of os.environ.get) gets the type
    that the form around it gives."""
    try:
        return fn()
    except Computed as c:
        c.type = type_
        raise


def str_or_list(node, what):
    v = literal(node)
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    if isinstance(v, list):
        return v
    raise Skip("%s %s is not a string or a list of strings" % (what, show(v)))


NESTING_WORDS = {"not", "and", "or", "if", "else", "lambda", "await", "in", "is"}


def busiest_statement(data):
    """The first line of the statement of `data` with the most operators
    (what a parser nests), for the message of a source too deep to parse;
    0 if it does not tokenize."""
    best, line, count, start = 0, 0, 0, 0
    try:
        for tok in tokenize.tokenize(io.BytesIO(data).readline):
            if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                if count > best:
                    best, line = count, start
                count, start = 0, 0
            elif (tok.type == tokenize.OP and tok.string != ",") or \
                    (tok.type == tokenize.NAME and tok.string in NESTING_WORDS):
                count += 1
                start = start or tok.start[0]
    except (tokenize.TokenError, SyntaxError, MemoryError, RecursionError):
        return 0
    return line


class ModuleReader:
    """Reads the options of one Python config module."""

    def __init__(self, path, prefix, warn, take_computed=False):
        """`take_computed`: keep an option whose default is computed, with
        what its source says (type, env variables, doc...) and `computed`
        set to the reason, for the import to complete (import_modules());
        else it is skipped."""
        self.path = path
        self.prefix = prefix
        self.warn = warn
        self.take_computed = take_computed
        self.skipped = 0
        self.skips = []  # (relative key, line, reason)
        try:
            self.data = read_regular(path, SOURCE_MAX, "a Python source")
        except OSError as e:
            raise InputError(path, 0, "cannot read: %s" % (e.strerror or e))
        except ValueError as e:
            raise InputError(path, 0, str(e))
        try:
            self.tree = ast.parse(self.data, filename=path)
        except SyntaxError as e:
            raise InputError(path, e.lineno or 0, "syntax error: %s" % e.msg)
        except ValueError as e:  # e.g. NUL bytes
            raise InputError(path, 0, "does not parse: %s" % e)
        except (RecursionError, MemoryError):  # 3000 x `1+`, 100000 x `-`: the parser's limits
            raise InputError(path, busiest_statement(self.data),
                             "nested too deeply for Python's parser")
        self.comments = {}
        self.code_lines = set()
        skip_types = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                      tokenize.ENCODING, tokenize.ENDMARKER, tokenize.COMMENT}
        try:
            for tok in tokenize.tokenize(io.BytesIO(self.data).readline):
                if tok.type == tokenize.COMMENT:
                    self.comments[tok.start[0]] = tok.string
                elif tok.type not in skip_types:
                    self.code_lines.update(range(tok.start[0], tok.end[0] + 1))
        except (tokenize.TokenError, SyntaxError) as e:  # pragma: no cover - ast parsed it
            raise InputError(path, 0, "does not tokenize: %s" % e)
        self.options = {}  # relative key -> Option, in declaration order
        self.helpers, self.returns = helper_functions(self.tree)
        self.imports = {}  # relative key -> line of the import that binds it
        self.classes = set()  # relative keys of the classes read as namespaces

    # -- messages ----------------------------------------------------------
    def full(self, key):
        return "%s.%s" % (self.prefix, key) if self.prefix else key

    def skip(self, key, line, reason):
        self.skipped += 1
        self.skips.append((key, line, reason))
        self.warn("skipped %s (%s:%d): %s" % (self.full(key), self.path, line, reason))

    def drop(self, key, line, reason):
        """An option defined earlier is changed in a way the importer cannot follow."""
        if key in self.options:
            del self.options[key]
            self.skip(key, line, reason)

    # -- comments ------------------------------------------------------------
    def compile_ignored(self, stmt):
        end = getattr(stmt, "end_lineno", stmt.lineno) or stmt.lineno
        for line in range(stmt.lineno, end + 1):
            if COMPILE_IGNORED_MARKER in self.comments.get(line, ""):
                return True
        line = stmt.lineno - 1
        while line in self.comments and line not in self.code_lines:
            if COMPILE_IGNORED_MARKER in self.comments[line]:
                return True
            line -= 1
        return False

    # -- walking -------------------------------------------------------------
    def read(self):
        self.body(self.tree.body, "")
        self.apply_module_lists()
        return list(self.options.values())

    def body(self, stmts, rel):
        for i, stmt in enumerate(stmts):
            nxt = stmts[i + 1] if i + 1 < len(stmts) else None
            doc = None
            if (isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                    and isinstance(nxt.value.value, str)):
                doc = nxt.value.value
            try:
                self.statement(stmt, rel, doc)
            except RecursionError:  # an assignment's own is a skip (assignment())
                raise InputError(self.path, stmt.lineno, "nested too deeply to read")

    def statement(self, stmt, rel, doc):
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            self.assignment(stmt, rel, doc)
        elif isinstance(stmt, ast.AugAssign):
            for name in target_names(stmt.target):
                self.drop(rel + name, stmt.lineno,
                          "changed by an augmented assignment at line %d" % stmt.lineno)
        elif isinstance(stmt, ast.Delete):
            for t in stmt.targets:
                for name in target_names(t):
                    self.drop(rel + name, stmt.lineno, "deleted at line %d" % stmt.lineno)
        elif isinstance(stmt, ast.ClassDef):
            self.klass(stmt, rel)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for a in stmt.names:
                self.imports[rel + (a.asname or a.name).split(".")[0]] = stmt.lineno
        elif isinstance(stmt, ast.Expr):
            self.expression(stmt, rel)
        elif isinstance(stmt, ast.If) and is_type_checking(stmt.test):
            return
        elif isinstance(stmt, (ast.If, ast.Try, ast.For, ast.While, ast.With,
                               ast.AsyncFor, ast.AsyncWith)) or \
                type(stmt).__name__ in ("TryStar", "Match"):
            self.block(stmt, rel)
        # imports, functions, pass, global...: not options

    def assignment(self, stmt, rel, doc):
        if isinstance(stmt, ast.Assign):
            if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
                for t in stmt.targets:
                    for name in target_names(t):
                        if not name.startswith("__"):
                            self.options.pop(rel + name, None)
                            self.skip(rel + name, stmt.lineno,
                                      "multiple or unpacking assignment")
                    self.mutation(t, rel, stmt.lineno)
                return
            name, ann = stmt.targets[0].id, None
        else:
            if not isinstance(stmt.target, ast.Name):
                self.mutation(stmt.target, rel, stmt.lineno)
                return
            if stmt.value is None:
                return  # a bare annotation declares nothing
            name, ann = stmt.target.id, stmt.annotation
        if name.startswith("__"):
            return
        key = rel + name
        opt = Option(self.full(key), (self.path, stmt.lineno))
        try:
            try:
                self.build(opt, ann, stmt.value)
            except Computed as e:
                if not self.take_computed:
                    raise
                opt.computed = e.reason
            if doc is not None:
                opt.doc = inspect.cleandoc(doc) or None
            if opt.alias is None:
                opt.hash_ignored = opt.hash_ignored or self.compile_ignored(stmt)
                opt.private = key.startswith("_")
            if opt.computed is None:
                normalize(opt)
                check_option(opt)
        except Skip as e:
            self.options.pop(key, None)
            self.skip(key, stmt.lineno, e.reason)
            return
        except RecursionError:  # x = 1+1+...+1, 600 terms: the parser takes it
            self.options.pop(key, None)
            self.skip(key, stmt.lineno, "its expression or annotation is nested too deeply to read")
            return
        self.options[key] = opt  # a reassignment keeps the first position

    def mutation(self, target, rel, line):
        """`x.attr = ...` or `x[k] = ...` on an option changes it."""
        node = target
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        if isinstance(node, ast.Name) and node is not target:
            self.drop(rel + node.id, line, "changed at line %d" % line)

    def expression(self, stmt, rel):
        call = stmt.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                and call.func.attr in MUTATING_METHODS:
            base = dotted(call.func.value)
            if base and "." not in base:
                self.drop(rel + base, stmt.lineno,
                          "changed by .%s() at line %d" % (call.func.attr, stmt.lineno))

    def klass(self, stmt, rel):
        bases = [dotted(b) for b in stmt.bases]
        if stmt.name.startswith("__"):
            return
        parent = inherited_class(stmt)
        if parent is not None and rel + parent in self.classes and \
                all(b in ("object", parent) for b in bases) and not stmt.keywords:
            pass  # @inherit_fields_from(P) class C(P): P's fields, then C's own
        elif any(b != "object" for b in bases) or stmt.keywords or stmt.decorator_list:
            self.skip(rel + stmt.name, stmt.lineno,
                      "class %s is not a plain config namespace (it has bases or "
                      "decorators)" % stmt.name)
            return
        self.classes.add(rel + stmt.name)
        own = rel + stmt.name + "."
        self.body(stmt.body, own)
        if parent is not None:
            # torch.utils._config_module.inherit_fields_from(): each public
            # field of the parent that the class does not define, after its own
            defined = {k for k in self.options if k.startswith(own)} | \
                {own + n for node in stmt.body for n in assigned_names(node)}
            base = rel + parent + "."
            for key, o in list(self.options.items()):
                name = key[len(base):]
                if key.startswith(base) and "." not in name and not name.startswith("_") \
                        and own + name not in defined:
                    c = copy.copy(o)
                    c.name = self.full(own + name)
                    self.options[own + name] = c
            for key, line, reason in list(self.skips):
                name = key[len(base):]
                if key.startswith(base) and "." not in name and not name.startswith("_") \
                        and own + name not in defined:
                    self.skip(own + name, line, "as %s%s: %s" % (base, name, reason))

    def block(self, stmt, rel):
        kind = type(stmt).__name__.lower().replace("async", "")
        seen = set()
        for node in walk_statements(stmt):
            for name in assigned_names(node):
                if name in seen or name.startswith("__"):
                    continue
                seen.add(name)
                key = rel + name
                if key in self.options:
                    self.drop(key, node.lineno,
                              "reassigned inside a %s block at line %d" % (kind, node.lineno))
                else:
                    self.skip(key, node.lineno, "assigned inside a %s block" % kind)

    def apply_module_lists(self):
        """PyTorch's _save_config_ignore (keys left out of save) and
        _cache_config_ignore_prefix (prefixes left out of the portable dump)."""
        ignore = self.options.get("_save_config_ignore")
        if ignore is not None and ignore.type in ("list", "set"):
            for key in ignore.default or ():
                o = self.options.get(key)
                if o is not None and o.alias is None:
                    o.save_ignored = True
        prefixes = self.options.get("_cache_config_ignore_prefix")
        if prefixes is not None and prefixes.type in ("list", "set"):
            for key, o in self.options.items():
                if o.alias is None and any(key.startswith(p) for p in prefixes.default or ()):
                    o.private = True

    # -- one option ----------------------------------------------------------
    def build(self, opt, ann, value):
        at = parse_annotation(ann) if ann is not None else None
        if at is not None and at.type is None:
            raise Skip("annotation %s is only None" % src(ann))
        if isinstance(value, ast.Call) and (dotted(value.func) or "").split(".")[-1] == "Config":
            return self.config_call(opt, at, value)
        try:
            v = evaluate(value, self.helpers)
        except Computed as c:  # what is known without the value
            if at is None and isinstance(value, ast.Call) and not value.args \
                    and isinstance(value.func, ast.Name) and value.func.id in self.returns:
                try:  # x = f(), def f() -> bool | None
                    at = parse_annotation(self.returns[value.func.id])
                except Skip:
                    pass
            t = at or (AnnType(c.type, c.nullable) if c.type else None)
            opt.form_typed = at is None and c.type is not None
            if t is not None:
                opt.type, opt.nullable, opt.choices = t.type, t.nullable, t.choices
            opt.env_default = list(c.env)
            raise
        self.combine(opt, at, v)

    def combine(self, opt, at, v):
        if at is not None:
            opt.type = at.type
            opt.nullable = at.nullable or v.nullable
            opt.choices = at.choices
        elif v.type is None:
            raise Skip("None without a type annotation")
        else:
            opt.type, opt.nullable = v.type, v.nullable
        if v.env and v.type is not None and v.type != opt.type \
                and not (opt.type == "float" and v.type == "int"):
            raise Skip("value is a %s, the annotation says %s" % (v.type, opt.type))
        opt.default = v.value
        opt.env_default = list(v.env)

    def config_call(self, opt, at, call):
        fields = {}
        if len(call.args) > len(CONFIG_POSITIONAL):
            raise Skip("Config() has too many arguments")
        for name, node in zip(CONFIG_POSITIONAL, call.args):
            fields[name] = node
        for kw in call.keywords:
            if kw.arg is None:
                raise Skip("Config(**...) is not understood")
            if kw.arg not in CONFIG_POSITIONAL and kw.arg not in CONFIG_EXTRA:
                raise Skip("Config() field %s is not understood" % kw.arg)
            if kw.arg in fields:
                raise Skip("Config() field %s given twice" % kw.arg)
            fields[kw.arg] = kw.value

        def text(key):
            v = literal(fields[key])
            if v is not None and not isinstance(v, str):
                raise Skip("Config() field %s %s is not a string" % (key, show(v)))
            return v

        vt = None
        if "value_type" in fields and not (isinstance(fields["value_type"], ast.Constant)
                                           and fields["value_type"].value is None):
            vt = parse_annotation(fields["value_type"])
        t = at or vt
        if at is not None and vt is not None and (at.type != vt.type):
            raise Skip("annotation says %s, value_type says %s" % (at.type, vt.type))
        alias = text("alias") if "alias" in fields else None
        if alias is not None:
            given = [k for k in ("default", "justknob", "env_name_default", "env_name_force")
                     if k in fields and not (isinstance(fields[k], ast.Constant)
                                             and fields[k].value is None)]
            if given:
                raise Skip("if alias is set, none of default, justknob, env_name_default "
                           "and env_name_force can be set (%s is)" % ", ".join(given))
            if t is None:
                raise Skip("alias without a type annotation or value_type")
            opt.type, opt.nullable, opt.alias = t.type, t.nullable, alias
            return
        if "default" not in fields:
            raise Skip("Config() without a default or an alias")
        computed = None
        try:
            default = literal(fields["default"])
        except Computed as e:  # the other fields are read all the same
            computed = Computed("Config() default: %s" % e.reason)
            if t is not None:
                opt.type, opt.nullable, opt.choices = t.type, t.nullable, t.choices
        except Skip as e:
            raise Skip("Config() default: %s" % e.reason)
        if computed is None:
            v = Val(default)
            if t is None and v.type is None:
                raise Skip("None default without a type annotation or value_type")
            self.combine(opt, t, v)
        if "justknob" in fields:
            opt.knob = text("justknob")
        if "env_name_default" in fields:
            opt.env_default = str_or_list(fields["env_name_default"], "env_name_default")
        if "env_name_force" in fields:
            opt.env_force = str_or_list(fields["env_name_force"], "env_name_force")
        if "deprecated" in fields:  # torch: True/False; shmcfg: the message
            dep = literal(fields["deprecated"])
            if not isinstance(dep, (bool, str)) and dep is not None:
                raise Skip("Config() field deprecated %s is not a bool or a string" % show(dep))
            if dep is True:
                opt.deprecated = text("deprecation_message") or "" \
                    if "deprecation_message" in fields else ""
            elif isinstance(dep, str):
                opt.deprecated = dep
        for key in ("min", "max"):
            if key in fields:
                setattr(opt, key, literal(fields[key]))
        if "choices" in fields:
            node = fields["choices"]
            if not isinstance(node, (ast.List, ast.Tuple, ast.Set)):
                raise Skip("Config() choices is not a list")
            opt.choices = [literal(e) for e in node.elts]
        if "implies" in fields:
            node = fields["implies"]
            if not isinstance(node, ast.Dict) or None in node.keys:
                raise Skip("Config() implies is not a dict literal")
            opt.implies = [(literal(k), literal(val)) for k, val in zip(node.keys, node.values)]
        for key in ("hash_ignored", "save_ignored"):
            if key in fields:
                b = literal(fields[key])
                if not isinstance(b, bool):
                    raise Skip("Config() field %s is not True or False" % key)
                setattr(opt, key, b)
        if computed is not None:
            raise computed


def helper_functions(tree):
    """Module-level functions of no arguments defined once: those whose body
    (after a docstring) is one `return EXPR`, name -> EXPR, and the return
    annotations of all, name -> annotation."""
    found, seen, returns = {}, set(), {}
    for stmt in tree.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = stmt.args
        if stmt.name not in seen and isinstance(stmt, ast.FunctionDef) \
                and stmt.returns is not None and not stmt.decorator_list \
                and not (a.args or a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg):
            returns[stmt.name] = stmt.returns
        else:
            returns.pop(stmt.name, None)
        body = stmt.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        a = stmt.args
        if stmt.name not in seen and isinstance(stmt, ast.FunctionDef) \
                and not stmt.decorator_list and len(body) == 1 \
                and isinstance(body[0], ast.Return) and body[0].value is not None \
                and not (a.args or a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg):
            found[stmt.name] = body[0].value
        else:
            found.pop(stmt.name, None)
        seen.add(stmt.name)
    return found, returns


def inherited_class(stmt):
    """P of a class decorated @inherit_fields_from(P) (and nothing else)."""
    if len(stmt.decorator_list) != 1:
        return None
    d = stmt.decorator_list[0]
    if isinstance(d, ast.Call) and (dotted(d.func) or "").split(".")[-1] == \
            "inherit_fields_from" and len(d.args) == 1 and not d.keywords \
            and isinstance(d.args[0], ast.Name):
        return d.args[0].id
    return None


def is_type_checking(test):
    return (dotted(test) or "").split(".")[-1] == "TYPE_CHECKING"


def target_names(t):
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, (ast.Tuple, ast.List)):
        return [n for e in t.elts for n in target_names(e)]
    if isinstance(t, ast.Starred):
        return target_names(t.value)
    return []


def walk_statements(stmt):
    """Statements nested in a compound statement, not entering defs/classes."""
    yield stmt
    stack = [stmt]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                  ast.Lambda)):
                if isinstance(child, ast.ClassDef):
                    yield child
                continue
            if isinstance(child, ast.stmt):
                yield child
            if isinstance(child, (ast.stmt, ast.excepthandler)) or \
                    type(child).__name__ == "match_case":
                stack.append(child)


def assigned_names(node):
    if isinstance(node, ast.Assign):
        return [n for t in node.targets for n in target_names(t)]
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        if isinstance(node, ast.AnnAssign) and node.value is None:
            return []
        return target_names(node.target)
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return target_names(node.target)
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [n for item in node.items if item.optional_vars is not None
                for n in target_names(item.optional_vars)]
    if isinstance(node, ast.ClassDef):
        return [node.name]
    return []


