"""From YAML to a validated FleetSpec, reporting every problem with its spec path and YAML position.

Three passes:
1. the document is type-checked against its written shape (`surface`): unknown keys, wrong types;
2. each cluster is resolved the way the original tool did it: backend chosen, `defaults` deep-merged
   under it (mig and kuberay replaced whole), a name derived when unset; the merge remembers where every
   value came from, so a problem with an inherited value points at the `defaults` line;
3. the semantic rules (`rules`) run over the resolved fleet.
Problems from all passes are collected and raised together as one SpecError.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from npa_pulumi.spec.constants import API_VERSION, BackendKind
from npa_pulumi.spec.errors import SpecError, SpecProblem
from npa_pulumi.spec.models import ClusterSpec, FleetSpec, ObjectStorageSpec, ProjectSpec, SoperatorSpec
from npa_pulumi.spec.names import PathTuple, format_path, slug
from npa_pulumi.spec.problems import RawProblem, problems_from_validation
from npa_pulumi.spec.rules import check_cluster, check_fleet
from npa_pulumi.spec.surface import FleetDocument, check_surface
from npa_pulumi.spec.yaml_source import LocationIndex, load_yaml, read_spec_text

# Policy blocks are replaced whole: an explicit `enabled: false` must not inherit enabled settings.
# So is `maintenance`: the most specific block (cluster, project, `defaults`) wins whole, never a mix of
# one level's windows and another's exclusions.
ATOMIC_KEYS = frozenset({"mig", "kuberay", "maintenance"})
# Keys of `defaults` that select or configure a backend rather than being mk8s cluster fields.
_BACKEND_KEYS = frozenset({"backend", "soperator", "mk8s"})
_HEADER_FIELDS = (
    "tenant_id",
    "region",
    "project_prefix",
    "ssh_public_key",
    "profile",
    "rollout",
    "remediation",
    "notify",
)

# Where each value of a merged mapping came from: relative path in the merge → absolute spec path.
Origins = dict[PathTuple, PathTuple]


def load_spec(path: str | Path) -> FleetSpec:
    """Read, parse and validate a fleet spec file. Raises SpecError (only) on any problem."""
    source = str(path)
    return parse_spec(read_spec_text(path), source)


def parse_spec(text: str, source: str = "<string>") -> FleetSpec:
    """Parse and validate fleet spec YAML text. Raises SpecError (only) on any problem."""
    data, index = load_yaml(text, source)
    return spec_from_data(data, source, index)


def spec_from_data(data: Any, source: str = "<data>", index: LocationIndex | None = None) -> FleetSpec:
    """Validate already-parsed spec data (a mapping as YAML would give). Raises SpecError."""
    builder = _FleetBuilder(index or LocationIndex())
    spec = builder.build(data)
    problems = builder.located_problems()
    if problems or spec is None:
        raise SpecError(problems or [SpecProblem(path="", message="the spec could not be read")], source)
    return spec


def ensure_valid(spec: FleetSpec, source: str = "<sdk>") -> FleetSpec:
    """Run the semantic rules over a FleetSpec built in Python; raises SpecError listing every problem."""
    problems = _dedupe([_unlocated(problem) for problem in check_fleet(spec)])
    if problems:
        raise SpecError(problems, source)
    return spec


def merge_tracked(
    base: dict[str, Any], base_src: PathTuple, override: dict[str, Any], override_src: PathTuple
) -> tuple[dict[str, Any], Origins]:
    """The original deep merge (override wins; mig/kuberay atomic), remembering each value's source."""
    merged: dict[str, Any] = {}
    origins: Origins = {(): override_src}
    for key, value in base.items():
        merged[key] = value
        origins[(key,)] = (*base_src, key)
    for key, value in override.items():
        current = merged.get(key)
        if key not in ATOMIC_KEYS and isinstance(value, dict) and isinstance(current, dict):
            sub, sub_origins = merge_tracked(current, (*base_src, key), value, (*override_src, key))
            merged[key] = sub
            origins.update({(key, *rel): src for rel, src in sub_origins.items()})
        else:
            merged[key] = value
            origins[(key,)] = (*override_src, key)
    return merged, origins


@dataclass
class _ResolvedEntry:
    """A cluster entry after backend selection and merging, before it becomes a ClusterSpec."""

    data: dict[str, Any]
    origins: Origins


@dataclass
class _FleetBuilder:
    index: LocationIndex
    problems: list[RawProblem] = field(default_factory=list)
    # Set when pass 1 found type errors: later construction failures only repeat them.
    structural: bool = False
    cluster_origins: dict[PathTuple, Origins] = field(default_factory=dict)
    # Positions in the built FleetSpec → positions in the document (they differ when an entry failed).
    project_sources: list[int] = field(default_factory=list)
    cluster_sources: dict[tuple[int, int], int] = field(default_factory=dict)
    bad_header: set[str] = field(default_factory=set)

    # --- pass 1 + 2 ---------------------------------------------------------------------------------

    def build(self, data: Any) -> FleetSpec | None:
        if data is None:
            self.problems.append(
                RawProblem(
                    (), "the spec is empty", "a fleet spec needs at least apiVersion, name and projects"
                )
            )
            return None
        if not isinstance(data, dict):
            kind = "a list" if isinstance(data, list) else "a single value"
            self.problems.append(
                RawProblem(
                    (),
                    f"the spec must be a mapping, not {kind}",
                    "start with apiVersion, name and projects keys",
                )
            )
            return None
        try:
            check_surface(data)
        except ValidationError as err:
            self.structural = True
            self.problems += problems_from_validation(err, FleetDocument)
        defaults = _mapping(data.get("defaults"))
        projects = self._projects(data.get("projects"), defaults)
        raw_projects = data.get("projects")
        if (not projects and isinstance(raw_projects, list) and raw_projects) or not isinstance(
            raw_projects, (list, type(None))
        ):
            self.bad_header.add("projects")  # already reported (failed entries, or not a list)
        spec = self._fleet(data, projects)
        if spec is not None:
            for problem in check_fleet(spec):
                if not (problem.path and problem.path[0] in self.bad_header):
                    self.problems.append(self._to_document_positions(problem))
        return spec

    def _projects(self, raw_projects: Any, defaults: dict[str, Any]) -> list[ProjectSpec]:
        if not isinstance(raw_projects, list) or not raw_projects:
            return []  # missing or empty: a fleet rule (pass 3); any other value: a type error (pass 1)
        projects: list[ProjectSpec] = []
        for position, entry in enumerate(raw_projects):
            if not isinstance(entry, dict):
                continue  # reported by pass 1
            project = self._project(entry, position, defaults)
            if project is not None:
                self.project_sources.append(position)
                for built, source in enumerate(project[1]):
                    self.cluster_sources[(len(projects), built)] = source
                projects.append(project[0])
        return projects

    def _project(
        self, entry: dict[str, Any], position: int, defaults: dict[str, Any]
    ) -> tuple[ProjectSpec, list[int]] | None:
        base: PathTuple = ("projects", position)
        raw_clusters = entry.get("clusters")
        entries: list[tuple[int, dict[str, Any]]]
        complete = True
        if raw_clusters is None:
            entries = [(0, {})]  # no clusters: one cluster from the pure defaults profile
            implicit = True
        elif isinstance(raw_clusters, list) and raw_clusters:
            implicit = False
            entries = []
            for index, item in enumerate(raw_clusters):
                if item is None or isinstance(item, dict):
                    entries.append((index, item or {}))
                else:
                    complete = False  # reported by pass 1
        else:
            if isinstance(raw_clusters, list):
                self.problems.append(
                    RawProblem(
                        (*base, "clusters"),
                        "project 'clusters' must be a non-empty list when set",
                        "omit 'clusters' for one cluster built from defaults",
                    )
                )
            return None
        several = len(raw_clusters) > 1 if isinstance(raw_clusters, list) else False
        clusters: list[ClusterSpec] = []
        sources: list[int] = []
        project_maintenance = (
            (entry["maintenance"], (*base, "maintenance")) if entry.get("maintenance") is not None else None
        )
        for index, raw in entries:
            cluster = self._cluster(
                raw, (*base, "clusters", index), index, several, implicit, defaults, project_maintenance
            )
            if cluster is None:
                complete = False
                continue
            clusters.append(cluster)
            sources.append(index)
        storage = self._object_storage(entry.get("object_storage"))
        if not complete or storage is False:
            # The project is left out of the fleet, but its clusters that did resolve are still checked.
            for cluster, index in zip(clusters, sources, strict=True):
                cluster_path: PathTuple = (*base, "clusters", index)
                self.problems += [
                    RawProblem((*cluster_path, *p.path), p.message, p.hint) for p in check_cluster(cluster)
                ]
            return None
        try:
            project = ProjectSpec.model_validate(
                {key: entry.get(key) for key in ("name", "project_id", "region", "maintenance")}
                | {"clusters": clusters, "object_storage": storage}
            )
        except ValidationError as err:
            self._construction_failed(err, ProjectSpec, base)
            return None
        return project, sources

    def _object_storage(self, raw: Any) -> ObjectStorageSpec | bool | None:
        if raw is None:
            return None
        try:
            return ObjectStorageSpec.model_validate(raw)
        except ValidationError:
            return False  # reported by pass 1

    def _cluster(
        self,
        raw: dict[str, Any],
        path: PathTuple,
        index: int,
        several: bool,
        implicit: bool,
        defaults: dict[str, Any],
        project_maintenance: tuple[Any, PathTuple] | None = None,
    ) -> ClusterSpec | None:
        backend_value = raw.get("backend", defaults.get("backend", "mk8s"))
        backend_src: PathTuple = (*path, "backend") if "backend" in raw else ("defaults", "backend")
        if isinstance(backend_value, bool) or not isinstance(backend_value, (str, int, float, type(None))):
            return None  # a type error from pass 1
        named = str(backend_value or "mk8s").strip().lower() or "mk8s"
        backend = BackendKind.parse(named)
        if backend is None:
            expected = " or ".join(repr(kind.value) for kind in BackendKind)
            self.problems.append(
                RawProblem(backend_src, f"unsupported cluster backend {named!r}", f"expected {expected}")
            )
            return None
        resolved: _ResolvedEntry | None
        if backend is BackendKind.SOPERATOR:
            resolved = self._soperator_entry(raw, path, defaults)
        elif raw.get("mk8s") is not None:
            resolved = self._mk8s_envelope_entry(raw, path, defaults)
        else:
            flat_defaults = {k: v for k, v in defaults.items() if k not in _BACKEND_KEYS}
            data, origins = merge_tracked(flat_defaults, ("defaults",), raw, path)
            resolved = _ResolvedEntry(data, origins)
        if resolved is None:
            return None
        _resolve_maintenance(resolved, raw, path, defaults, project_maintenance)
        resolved.data["name"] = _cluster_name(resolved.data.get("name"), index, several)
        if implicit:
            resolved.origins[()] = path
        self.cluster_origins[path] = resolved.origins
        # Unknown keys were reported by pass 1; dropping them here lets the rest of the cluster be checked.
        known = {k: v for k, v in resolved.data.items() if k in ClusterSpec.model_fields}
        payload = {
            **known,
            "backend": backend,
            "backend_explicit": backend is BackendKind.SOPERATOR or "backend" in raw or "mk8s" in raw,
        }
        try:
            return ClusterSpec.model_validate(payload)
        except ValidationError as err:
            self._construction_failed(err, ClusterSpec, path)
            return None

    def _soperator_entry(
        self, raw: dict[str, Any], path: PathTuple, defaults: dict[str, Any]
    ) -> _ResolvedEntry:
        for key in raw:
            if key not in ("name", "backend", "soperator", "maintenance"):
                self.problems.append(
                    RawProblem(
                        (*path, key),
                        f"a soperator cluster cannot have the mk8s/flat field '{key}'",
                        "place backend settings under 'soperator'",
                    )
                )
        default_payload = _mapping(defaults.get("soperator"))
        own_payload = _mapping(raw.get("soperator"))
        payload, payload_origins = merge_tracked(
            default_payload, ("defaults", "soperator"), own_payload, (*path, "soperator")
        )
        payload = {k: v for k, v in payload.items() if k in SoperatorSpec.model_fields}  # others: pass 1
        origins: Origins = {(): path, **{("soperator", *rel): src for rel, src in payload_origins.items()}}
        name = raw.get("name") or defaults.get("name")
        origins[("name",)] = (*path, "name") if raw.get("name") else ("defaults", "name")
        return _ResolvedEntry({"name": name, "soperator": payload}, origins)

    def _mk8s_envelope_entry(
        self, raw: dict[str, Any], path: PathTuple, defaults: dict[str, Any]
    ) -> _ResolvedEntry | None:
        envelope = raw.get("mk8s")
        if not isinstance(envelope, dict):
            return None  # a type error from pass 1
        for key in raw:
            if key not in ("name", "backend", "mk8s"):
                self.problems.append(
                    RawProblem(
                        (*path, key),
                        f"the 'mk8s' envelope cannot be mixed with the flat field '{key}'",
                        "move it under 'mk8s'",
                    )
                )
        base_defaults = defaults.get("mk8s")
        base_src: PathTuple
        if isinstance(base_defaults, dict) and base_defaults:
            base, base_src = base_defaults, ("defaults", "mk8s")
        else:
            base = {k: v for k, v in defaults.items() if k not in _BACKEND_KEYS}
            base_src = ("defaults",)
        data, origins = merge_tracked(base, base_src, envelope, (*path, "mk8s"))
        origins[()] = path
        if raw.get("name"):  # the outer name wins
            data["name"] = raw["name"]
            origins[("name",)] = (*path, "name")
        return _ResolvedEntry(data, origins)

    def _construction_failed(self, err: ValidationError, model: type[BaseModel], path: PathTuple) -> None:
        # After pass 1 found type errors, construction failures only repeat them.
        if not self.structural:
            self.problems += problems_from_validation(err, model, path)

    def _fleet(self, data: dict[str, Any], projects: list[ProjectSpec]) -> FleetSpec | None:
        header: dict[str, Any] = {key: data.get(key) for key in _HEADER_FIELDS}
        header["apiVersion"] = data.get("apiVersion", API_VERSION)
        name = data.get("name")
        header["name"] = (
            slug(str(getattr(name, "yaml_text", name)))
            if isinstance(name, (str, int, float)) and not isinstance(name, bool)
            else (name if name is not None else "")
        )
        for key, value in list(header.items()):
            try:
                FleetSpec.model_validate({key: value})
            except ValidationError:
                self.bad_header.add(key)  # reported by pass 1
                del header[key]
        try:
            return FleetSpec.model_validate({**header, "projects": projects})
        except ValidationError as err:
            self._construction_failed(err, FleetSpec, ())
            return None

    # --- pass 3 and locating -----------------------------------------------------------------------

    def located_problems(self) -> list[SpecProblem]:
        located = _dedupe([self._locate(problem) for problem in self.problems])
        # In document order; problems without a position (none, normally) last.
        return sorted(located, key=lambda p: (p.line is None, p.line or 0, p.column or 0))

    def _to_document_positions(self, problem: RawProblem) -> RawProblem:
        """Rewrite `projects[i].clusters[j]` from positions in the built fleet to those in the document."""
        path = problem.path
        if len(path) < 2 or path[0] != "projects" or not isinstance(path[1], int):
            return problem
        built_project = path[1]
        rest: PathTuple = path[2:]
        if len(path) >= 4 and path[2] == "clusters" and isinstance(path[3], int):
            rest = ("clusters", self.cluster_sources.get((built_project, path[3]), path[3]), *path[4:])
        project = (
            self.project_sources[built_project]
            if built_project < len(self.project_sources)
            else built_project
        )
        return RawProblem(("projects", project, *rest), problem.message, problem.hint)

    def _locate(self, problem: RawProblem) -> SpecProblem:
        path = problem.path
        source_path, display, message = path, path, problem.message
        origins = self.cluster_origins.get(path[:4]) if len(path) >= 4 else None
        if origins is not None:
            relative = path[4:]
            for end in range(len(relative), -1, -1):
                origin = origins.get(relative[:end])
                if origin is not None:
                    source_path = (*origin, *relative[end:])
                    break
            if source_path[:1] == ("defaults",):
                message += f" (inherited from {format_path(self._nearest_written(source_path))})"
            else:
                display = source_path
        position = self.index.position(source_path)
        return SpecProblem(
            path=format_path(display),
            line=position[0] if position else None,
            column=position[1] if position else None,
            message=message,
            hint=problem.hint,
        )

    def _nearest_written(self, path: PathTuple) -> PathTuple:
        for end in range(len(path), 0, -1):
            if self.index.exact(path[:end]) is not None:
                return path[:end]
        return path


def _resolve_maintenance(
    resolved: _ResolvedEntry,
    raw: dict[str, Any],
    path: PathTuple,
    defaults: dict[str, Any],
    project: tuple[Any, PathTuple] | None,
) -> None:
    """The most specific `maintenance` block wins whole: the cluster's own, else its project's, else the
    fleet's (`defaults`), for either backend (a soperator cluster takes it beside its payload)."""
    envelope = _mapping(raw.get("mk8s"))
    if raw.get("maintenance") is not None:
        resolved.data["maintenance"] = raw["maintenance"]
        resolved.origins[("maintenance",)] = (*path, "maintenance")
    elif envelope.get("maintenance") is not None:
        return  # the envelope's own block, merged in place
    elif project is not None:
        resolved.data["maintenance"] = project[0]
        resolved.origins[("maintenance",)] = project[1]
    elif "maintenance" not in resolved.data and defaults.get("maintenance") is not None:
        resolved.data["maintenance"] = defaults["maintenance"]  # a soperator cluster: not merged above
        resolved.origins[("maintenance",)] = ("defaults", "maintenance")


def _mapping(value: Any) -> dict[str, Any]:
    """A mapping from the document, or {} where pass 1 has already reported something else."""
    return value if isinstance(value, dict) else {}


def _cluster_name(value: Any, index: int, several: bool) -> Any:
    """Unset → `cluster` (or `cluster-<i>` with several clusters); set → its slug, or `cluster` if empty."""
    if not value:
        return f"cluster-{index}" if several else "cluster"
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return slug(str(getattr(value, "yaml_text", value))) or "cluster"
    return value  # a type error from pass 1


def _unlocated(problem: RawProblem) -> SpecProblem:
    return SpecProblem(path=format_path(problem.path), message=problem.message, hint=problem.hint)


def _dedupe(problems: list[SpecProblem]) -> list[SpecProblem]:
    """One report per distinct problem: a bad default inherited by many clusters is reported once."""
    seen: dict[tuple[Any, ...], int] = {}
    result: list[SpecProblem] = []
    for problem in problems:
        key = (
            (problem.line, problem.column, problem.message, problem.hint)
            if problem.line is not None
            else (problem.path, problem.message, problem.hint)
        )
        if key in seen:
            continue
        seen[key] = len(result)
        result.append(problem)
    return result
