"""Official checkpoint key layouts and the declared rules that convert them to edgeattn parameter names.

A :class:`Layout` is a table of rules for one upstream code base (timm, mit-han-lab/efficientvit,
microsoft/CSWin-Transformer, fudan-zvg/SOFT): each rule names an upstream key pattern and the edgeattn name it
becomes. Nothing is matched by position or guessed from shapes: a state dict is in a layout when every one of its
keys is claimed by a rule and the result is exactly the architecture's parameter set; then the shapes must agree
too. :func:`convert` tries the edgeattn names first, then every layout declared for the architecture, and says
which layouts it tried when none fits.

Rule templates: ``{name}`` in a source pattern matches a decimal index, ``{p}`` one name component (``weight``,
``running_mean``...), ``{rest}`` the remainder of the key; a target template can use them back, with integer
offsets (``{s-1}``). A :class:`Rename` may list several targets: the one the architecture has wins, which is how
one upstream name serves modules that differ between attention variants (CSWin's ``attns.0.get_v`` is
``attn.attns.0.get_v`` in LOCAL, ``attn.get_v`` in GLOBAL/EFFATT/VaniATT blocks and ``attn.get_v_global`` in
ELFATT blocks; every block has exactly one of them). A :class:`Concat` joins several upstream tensors into one
(SOFT's stage-4 ``q`` and ``kv`` become ``qkv``).
"""
import fnmatch
import re

_FIELD = re.compile(r"\{(\w+)([+-]\d+)?\}")
_FIELD_PATTERNS = {"rest": r"(?P<rest>.+)", "p": r"(?P<p>[A-Za-z_][A-Za-z0-9_]*)"}


def _compile(template):
    """A source template -> anchored regex with one named group per field."""
    parts = []
    position = 0
    for match in _FIELD.finditer(template):
        parts.append(re.escape(template[position:match.start()]))
        name = match.group(1)
        parts.append(_FIELD_PATTERNS.get(name, r"(?P<{}>\d+)".format(name)))
        position = match.end()
    parts.append(re.escape(template[position:]))
    return re.compile("".join(parts) + r"\Z")


def _fill(template, fields):
    """Substitute fields (with ``{s-1}``-style offsets on indices) into a target template."""

    def value(match):
        text = fields[match.group(1)]
        if match.group(2):
            return str(int(text) + int(match.group(2)))
        return text

    return _FIELD.sub(value, template)


class Rename(object):
    """``source`` (template) -> the first of ``targets`` that the architecture has (or the first, to report)."""

    def __init__(self, source, *targets):
        self.source = source
        self.targets = targets
        self._regex = _compile(source)

    def apply(self, key, expected):
        match = self._regex.match(key)
        if match is None:
            return None
        names = [_fill(target, match.groupdict()) for target in self.targets]
        return next((name for name in names if name in expected), names[0])


class Concat(object):
    """Upstream tensors ``sources`` (templates sharing their fields) concatenated along ``dim`` -> ``target``."""

    def __init__(self, sources, target, dim=0):
        self.sources = sources
        self.target = target
        self.dim = dim
        self._regex = _compile(sources[0])

    def parts(self, key):
        match = self._regex.match(key)
        if match is None:
            return None
        fields = match.groupdict()
        return [_fill(source, fields) for source in self.sources], _fill(self.target, fields)


class Layout(object):
    """One upstream naming scheme: ``name``, where it comes from (``source``), which registered architectures it
    applies to (``archs``, shell patterns), its ``rules`` (first match wins), the config the architecture must be
    built with to reproduce the upstream numerics (``config``), and ``notes`` for the summary."""

    def __init__(self, name, source, archs, rules, config=None, notes=""):
        self.name = name
        self.source = source
        self.archs = tuple(archs)
        self.rules = tuple(rules)
        self.config = dict(config or {})
        self.notes = notes

    def applies_to(self, arch):
        return any(fnmatch.fnmatchcase(arch, pattern) for pattern in self.archs)

    def convert(self, state_dict, expected):
        """Rename ``state_dict`` toward the ``expected`` keys; returns a :class:`Conversion`."""
        import torch

        result = Conversion(self)
        consumed = set()
        # Joins first: their later parts must not be claimed by a plain rename further down the table.
        for rule in self.rules:
            if not isinstance(rule, Concat):
                continue
            for key in state_dict:
                found = rule.parts(key) if key not in consumed else None
                if found is None:
                    continue
                sources, target = found
                if not all(source in state_dict for source in sources):
                    continue
                consumed.update(sources)
                tensors = [state_dict[source] for source in sources]
                if len({tuple(t.shape[:rule.dim]) + tuple(t.shape[rule.dim + 1:]) for t in tensors}) > 1:
                    result.bad_join = (sources, [tuple(t.shape) for t in tensors])
                    tensors = tensors[:1]
                result.add(target, torch.cat(tensors, dim=rule.dim) if len(tensors) > 1 else tensors[0], sources)
        for key, tensor in state_dict.items():
            if key in consumed:
                continue
            for rule in self.rules:
                if isinstance(rule, Rename):
                    target = rule.apply(key, expected)
                    if target is not None:
                        result.add(target, tensor, (key,))
                        break
            else:
                result.unclaimed.append(key)
        result.finish(expected)
        return result


class Conversion(object):
    """The result of one layout's rules on one state dict."""

    def __init__(self, layout):
        self.layout = layout
        self.state_dict = {}
        self.origin = {}  # our name -> upstream key(s)
        self.unclaimed = []  # upstream keys no rule claimed
        self.unexpected = []  # upstream keys whose converted name the architecture does not have
        self.missing = []  # our names no upstream key became
        self.duplicates = []
        self.bad_join = None

    def add(self, target, tensor, sources):
        if target in self.state_dict:
            self.duplicates.extend(sources)
            return
        self.state_dict[target] = tensor
        self.origin[target] = tuple(sources)

    def finish(self, expected):
        import torch

        for target in list(self.state_dict):
            if target not in expected:
                self.unexpected.extend(self.origin.pop(target))
                del self.state_dict[target]
        self.missing = [key for key in expected if key not in self.state_dict]
        if self.state_dict:
            # BatchNorm's step counter only matters for training with momentum=None; files from code that
            # drops it (or from before PyTorch 0.4.1) load with a zero count.
            for key in [key for key in self.missing if key.endswith(".num_batches_tracked")]:
                self.state_dict[key] = torch.tensor(0, dtype=torch.long)
                self.origin[key] = ("(absent BatchNorm step counter)",)
            self.missing = [key for key in self.missing if key not in self.state_dict]

    @property
    def unmatched(self):
        """Upstream keys that did not land in the architecture, in file order."""
        return self.unclaimed + self.unexpected + self.duplicates

    @property
    def fits(self):
        """Every upstream key placed and every weight present (shapes, and a join of unequal widths, are checked
        by the loader, which names the tensors)."""
        return not self.unmatched and not self.missing

    @property
    def matched(self):
        return len(self.state_dict)

    def source_name(self, target):
        return " + ".join(self.origin.get(target, (target,)))


#: edgeattn's own names: a bare ``model.state_dict()`` of a registry model
NATIVE = Layout("edgeattn", "edgeattn parameter names (model.state_dict())", ["*"], [Rename("{rest}", "{rest}")])


def registered_layouts():
    from . import cswin, efficientvit, soft

    return efficientvit.LAYOUTS + cswin.LAYOUTS + soft.LAYOUTS


def layouts_for(arch):
    """The layouts to try for ``arch``: edgeattn's own names first, then every upstream layout declared for it."""
    return [NATIVE] + [layout for layout in registered_layouts() if layout.applies_to(arch)]
