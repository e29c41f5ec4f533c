"""The embedded Nebius simulator: every operation of the local cloud, on plain dicts.

`LocalSimulator` composes the simulator's services over one store (the database handle, with its clock)
and names each operation once, as the service that answers it; `LocalCloud` (the port adapter) turns
these dicts into port records; the machine-facing API (`python -m npa_pulumi.simulator.api`) prints them
as JSON for scripts and soperator's stand-in recipe. The simulator and its modules stay free of pydantic
and other heavy imports so that API starts fast.

    store.py            the database handle: seeding, the operation envelope (faults, transactions)
    transaction.py      one operation's transaction: lookups, creates and deletes every service shares
    projects.py         identity, IAM projects (and the default topology a new project may get)
    vpc.py              networks, subnets, security groups
    quotas.py           quota allowances and capacity block groups
    storage.py          buckets, their grants and the bucket probe
    service_accounts.py service accounts and access keys (access_keys.py: derivable secrets)
    compute.py          shared filesystems, GPU clusters
    holdings.py         what else a project can hold (instances, disks, registries, IAM groups): a table
    mk8s.py             mk8s clusters and node groups, the clusters' API servers
    provisioning.py     the recipe's bounded waits: create, wait until RUNNING, roll back
    node_health.py      faults on nodes, Slurm roles and drivers; maintenance events, node replacement
    admin.py            settings, fault injection, the inventory
    scheduling.py       starting node groups when their quota or capacity block fits
    accounting.py       what each object consumes, and current usage
    seaweed.py, seaweedd.py  the S3 server (SeaweedFS): the buckets and keys it holds; starting, stopping it
"""

from __future__ import annotations

from pathlib import Path

from npa_pulumi.simulator.admin import ENV_WAIT_TIMEOUT, SETTINGS, FaultInjection, Inventory, Settings
from npa_pulumi.simulator.compute import Compute
from npa_pulumi.simulator.faults import OPERATIONS
from npa_pulumi.simulator.holdings import Holdings
from npa_pulumi.simulator.mk8s import Mk8s
from npa_pulumi.simulator.node_health import NodeHealth
from npa_pulumi.simulator.projects import Projects
from npa_pulumi.simulator.provisioning import Provisioning
from npa_pulumi.simulator.quotas import Quotas
from npa_pulumi.simulator.service_accounts import ServiceAccounts
from npa_pulumi.simulator.services import HeldOperation, Served
from npa_pulumi.simulator.storage import Buckets
from npa_pulumi.simulator.store import Store
from npa_pulumi.simulator.transaction import LocalCloudUnusable
from npa_pulumi.simulator.vpc import Vpc


class LocalSimulator:
    """The local Nebius simulator bound to one directory (`$NPA_LOCAL_CLOUD_DIR`, else
    `~/.npa-pulumi/local-cloud/`); seeded from the default tenant fixture on first use."""

    def __init__(self, directory: Path | None = None, *, auto_init: bool = True) -> None:
        self.store = Store(directory, auto_init=auto_init)
        self.config = Settings(self.store)
        self.fault_injection = FaultInjection(self.store)
        self.listing = Inventory(self.store)
        self.projects = Projects(self.store)
        self.vpc = Vpc(self.store)
        self.quotas = Quotas(self.store)
        self.buckets = Buckets(self.store)
        self.service_accounts = ServiceAccounts(self.store)
        self.compute = Compute(self.store)
        self.holdings = Holdings(self.store)
        self.mk8s = Mk8s(self.store, self.config)
        self.provisioning = Provisioning(self.store, self.config, self.mk8s)
        self.node_health = NodeHealth(self.store)

    @property
    def directory(self) -> Path:
        return self.store.directory

    @property
    def path(self) -> Path:
        return self.store.path

    # the database (store.py)
    is_initialised = Served("store", Store.is_initialised)
    initialise = Served("store", Store.initialise)
    reset = Served("store", Store.reset)

    # administration (admin.py): not cloud API calls
    settings = Served("config", Settings.settings)
    set_setting = Served("config", Settings.set_setting)
    kubernetes_api_enabled = Served("config", Settings.kubernetes_api_enabled)
    wait_timeout = Served("config", Settings.wait_timeout)
    add_fault = Served("fault_injection", FaultInjection.add_fault)
    list_faults = Served("fault_injection", FaultInjection.list_faults)
    clear_faults = Served("fault_injection", FaultInjection.clear_faults)
    set_api_fault = Served("fault_injection", FaultInjection.set_api_fault)
    inventory = Served("listing", Inventory.inventory)

    # identity and IAM projects (projects.py)
    principal = Served("projects", Projects.principal)
    default_region = Served("projects", Projects.default_region)
    list_projects = Served("projects", Projects.list_projects)
    get_project = Served("projects", Projects.get_project)
    create_project = Served("projects", Projects.create_project)
    delete_project = Served("projects", Projects.delete_project)

    # VPC (vpc.py)
    list_networks = Served("vpc", Vpc.list_networks)
    get_network = Served("vpc", Vpc.get_network)
    create_network = Served("vpc", Vpc.create_network)
    delete_network = Served("vpc", Vpc.delete_network)
    list_security_groups = Served("vpc", Vpc.list_security_groups)
    create_security_group = Served("vpc", Vpc.create_security_group)
    delete_security_group = Served("vpc", Vpc.delete_security_group)
    list_subnets = Served("vpc", Vpc.list_subnets)
    get_subnet = Served("vpc", Vpc.get_subnet)
    create_subnet = Served("vpc", Vpc.create_subnet)
    delete_subnet = Served("vpc", Vpc.delete_subnet)

    # quota allowances and reserved capacity (quotas.py)
    list_quota_allowances = Served("quotas", Quotas.list_quota_allowances)
    list_capacity_block_groups = Served("quotas", Quotas.list_capacity_block_groups)
    get_capacity_block_group = Served("quotas", Quotas.get_capacity_block_group)

    # object storage (storage.py)
    get_bucket = Served("buckets", Buckets.get_bucket)
    find_bucket = Served("buckets", Buckets.find_bucket)
    create_bucket = Served("buckets", Buckets.create_bucket)
    list_buckets = Served("buckets", Buckets.list_buckets)
    count_bucket_objects = Served("buckets", Buckets.count_bucket_objects)
    put_object = Served("buckets", Buckets.put_object)
    delete_bucket = Served("buckets", Buckets.delete_bucket)
    probe_bucket = Served("buckets", Buckets.probe_bucket)
    grant_bucket_access = Served("buckets", Buckets.grant_bucket_access)

    # IAM service accounts and access keys (service_accounts.py)
    find_service_account = Served("service_accounts", ServiceAccounts.find_service_account)
    list_service_accounts = Served("service_accounts", ServiceAccounts.list_service_accounts)
    list_access_keys = Served("service_accounts", ServiceAccounts.list_access_keys)
    create_service_account = Served("service_accounts", ServiceAccounts.create_service_account)
    delete_service_account = Served("service_accounts", ServiceAccounts.delete_service_account)
    create_access_key = Served("service_accounts", ServiceAccounts.create_access_key)
    delete_access_key = Served("service_accounts", ServiceAccounts.delete_access_key)

    # shared filesystems and GPU clusters (compute.py)
    create_filesystem = Served("compute", Compute.create_filesystem)
    filesystem_snapshot = Served("compute", Compute.filesystem_snapshot)
    get_filesystem = Served("compute", Compute.get_filesystem)
    list_filesystems = Served("compute", Compute.list_filesystems)
    delete_filesystem = Served("compute", Compute.delete_filesystem)
    create_gpu_cluster = Served("compute", Compute.create_gpu_cluster)
    get_gpu_cluster = Served("compute", Compute.get_gpu_cluster)
    list_gpu_clusters = Served("compute", Compute.list_gpu_clusters)
    delete_gpu_cluster = Served("compute", Compute.delete_gpu_cluster)

    # what else a project can hold (holdings.py: one row of HELD_KINDS each)
    create_instance = HeldOperation()
    list_instances = HeldOperation()
    delete_instance = HeldOperation()
    create_disk = HeldOperation()
    list_disks = HeldOperation()
    delete_disk = HeldOperation()
    create_registry = HeldOperation()
    list_registries = HeldOperation()
    delete_registry = HeldOperation()
    create_group = HeldOperation()
    list_groups = HeldOperation()
    delete_group = HeldOperation()
    set_labels = Served("holdings", Holdings.set_labels)

    # Managed Kubernetes (mk8s.py)
    create_cluster = Served("mk8s", Mk8s.create_cluster)
    get_cluster = Served("mk8s", Mk8s.get_cluster)
    list_clusters = Served("mk8s", Mk8s.list_clusters)
    delete_cluster = Served("mk8s", Mk8s.delete_cluster)
    cluster_snapshot = Served("mk8s", Mk8s.cluster_snapshot)
    set_cluster_addons = Served("mk8s", Mk8s.set_cluster_addons)
    merge_cluster_addons = Served("mk8s", Mk8s.merge_cluster_addons)
    get_cluster_credentials = Served("mk8s", Mk8s.get_cluster_credentials)
    install_release = Served("mk8s", Mk8s.install_release)
    get_release = Served("mk8s", Mk8s.get_release)
    uninstall_release = Served("mk8s", Mk8s.uninstall_release)
    create_node_group = Served("mk8s", Mk8s.create_node_group)
    get_node_group = Served("mk8s", Mk8s.get_node_group)
    list_node_groups = Served("mk8s", Mk8s.list_node_groups)
    list_project_node_groups = Served("mk8s", Mk8s.list_project_node_groups)
    resize_node_group = Served("mk8s", Mk8s.resize_node_group)
    edit_node_group_template = Served("mk8s", Mk8s.edit_node_group_template)
    upgrade_cluster = Served("mk8s", Mk8s.upgrade_cluster)
    upgrade_node_group = Served("mk8s", Mk8s.upgrade_node_group)
    delete_node_group = Served("mk8s", Mk8s.delete_node_group)

    # the recipe's bounded waits (provisioning.py)
    wait_until_running = Served("provisioning", Provisioning.wait_until_running)
    provision = Served("provisioning", Provisioning.provision)

    # what happens to a cluster's nodes (node_health.py)
    set_node_fault = Served("node_health", NodeHealth.set_node_fault)
    set_slurm_fault = Served("node_health", NodeHealth.set_slurm_fault)
    set_slurm_jobs = Served("node_health", NodeHealth.set_slurm_jobs)
    set_driver_fault = Served("node_health", NodeHealth.set_driver_fault)
    replace_node = Served("node_health", NodeHealth.replace_node)
    recover_node = Served("node_health", NodeHealth.recover_node)
    remove_node = Served("node_health", NodeHealth.remove_node)
    add_maintenance = Served("node_health", NodeHealth.add_maintenance)
    finish_maintenance = Served("node_health", NodeHealth.finish_maintenance)
    list_active_maintenance = Served("node_health", NodeHealth.list_active_maintenance)


__all__ = ["ENV_WAIT_TIMEOUT", "OPERATIONS", "SETTINGS", "LocalCloudUnusable", "LocalSimulator"]
