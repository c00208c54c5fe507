//! The shapes of the five SLO config keys, as data: JSON names, Go field names (for the
//! validator namespaces of CM-3), Go types (for CM-2 decode errors) and the field limits (CM-3).
//!
//! A table rather than serde structs because CM-3 reports Go type paths that include embedded
//! struct names (`ColocationCfg.NodeConfigs[0].ColocationStrategy.DegradeTimeMinutes`), and
//! walking one description gives decode checks, limits and paths from a single source.

/// A Go field type as it decodes from JSON.
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    /// `*int64` / `*int32`: a JSON integer.
    Int,
    /// `*float64`: any JSON number.
    Float,
    /// `*bool`.
    Bool,
    /// `string` (a plain string upstream).
    Str,
    /// `intstr.IntOrString` / `resource.Quantity`: a number or a string.
    IntOrStr,
    /// Anything (not examined).
    Any,
    /// `*metav1.LabelSelector` (checked by CM-2).
    Selector,
    /// A nested struct (pointer) under its own JSON key.
    Obj(&'static [F]),
    /// A slice of structs.
    ObjArr(&'static [F]),
    /// An embedded struct: its fields sit in the same JSON object; its Go name joins the path.
    Inline(&'static [F]),
}

/// One field limit, in go-playground/validator terms.
#[derive(Debug, Clone, Copy)]
pub enum Check {
    /// `min=n`.
    Min(f64),
    /// `max=n`.
    Max(f64),
    /// `gt=n`.
    Gt(f64),
    /// `gtfield=Other` (JSON name, Go name); fails when the other field is absent.
    GtField(&'static str, &'static str),
    /// `ltfield=Other`.
    LtField(&'static str, &'static str),
}

/// One field.
#[derive(Debug, Clone, Copy)]
pub struct F {
    /// JSON name (empty for inline structs).
    pub json: &'static str,
    /// Go field (or embedded type) name.
    pub go: &'static str,
    /// Go type.
    pub ty: Ty,
    /// Limits, in tag order.
    pub checks: &'static [Check],
}

const fn f(json: &'static str, go: &'static str, ty: Ty, checks: &'static [Check]) -> F {
    F {
        json,
        go,
        ty,
        checks,
    }
}

const PCT: &[Check] = &[Check::Min(0.0), Check::Max(100.0)];
const BIT: &[Check] = &[Check::Min(0.0), Check::Max(1.0)];
const NONNEG: &[Check] = &[Check::Min(0.0)];
const ONE_UP: &[Check] = &[Check::Min(1.0)];

/// `NodeCfgProfile`, embedded in every node strategy.
const PROFILE: &[F] = &[
    f("name", "Name", Ty::Str, &[]),
    f("nodeSelector", "NodeSelector", Ty::Selector, &[]),
];

const COLOCATION_STRATEGY: &[F] = &[
    f("enable", "Enable", Ty::Bool, &[]),
    f(
        "metricAggregateDurationSeconds",
        "MetricAggregateDurationSeconds",
        Ty::Int,
        ONE_UP,
    ),
    f(
        "metricReportIntervalSeconds",
        "MetricReportIntervalSeconds",
        Ty::Int,
        ONE_UP,
    ),
    f(
        "metricAggregatePolicy",
        "MetricAggregatePolicy",
        Ty::Any,
        &[],
    ),
    f(
        "metricMemoryCollectPolicy",
        "MetricMemoryCollectPolicy",
        Ty::Any,
        &[],
    ),
    f(
        "cpuReclaimThresholdPercent",
        "CPUReclaimThresholdPercent",
        Ty::Int,
        NONNEG,
    ),
    f("cpuCalculatePolicy", "CPUCalculatePolicy", Ty::Any, &[]),
    f(
        "memoryReclaimThresholdPercent",
        "MemoryReclaimThresholdPercent",
        Ty::Int,
        NONNEG,
    ),
    f(
        "memoryCalculatePolicy",
        "MemoryCalculatePolicy",
        Ty::Any,
        &[],
    ),
    f("degradeTimeMinutes", "DegradeTimeMinutes", Ty::Int, ONE_UP),
    f(
        "updateTimeThresholdSeconds",
        "UpdateTimeThresholdSeconds",
        Ty::Int,
        ONE_UP,
    ),
    f(
        "resourceDiffThreshold",
        "ResourceDiffThreshold",
        Ty::Float,
        &[Check::Gt(0.0), Check::Max(1.0)],
    ),
    f(
        "batchCPUThresholdPercent",
        "BatchCPUThresholdPercent",
        Ty::Int,
        NONNEG,
    ),
    f(
        "batchMemoryThresholdPercent",
        "BatchMemoryThresholdPercent",
        Ty::Int,
        NONNEG,
    ),
    f(
        "midCPUThresholdPercent",
        "MidCPUThresholdPercent",
        Ty::Int,
        PCT,
    ),
    f(
        "midMemoryThresholdPercent",
        "MidMemoryThresholdPercent",
        Ty::Int,
        PCT,
    ),
    f(
        "midUnallocatedPercent",
        "MidUnallocatedPercent",
        Ty::Int,
        PCT,
    ),
    f(
        "midStaticCPUReservedPercent",
        "MidStaticCPUReservedPercent",
        Ty::Int,
        PCT,
    ),
    f(
        "midStaticMemoryReservedPercent",
        "MidStaticMemoryReservedPercent",
        Ty::Int,
        PCT,
    ),
];

const NODE_COLOCATION: &[F] = &[
    f("", "NodeCfgProfile", Ty::Inline(PROFILE), &[]),
    f(
        "",
        "ColocationStrategy",
        Ty::Inline(COLOCATION_STRATEGY),
        &[],
    ),
];

/// `colocation-config` → `ColocationCfg`.
pub const COLOCATION: &[F] = &[
    f(
        "",
        "ColocationStrategy",
        Ty::Inline(COLOCATION_STRATEGY),
        &[],
    ),
    f(
        "nodeConfigs",
        "NodeConfigs",
        Ty::ObjArr(NODE_COLOCATION),
        &[],
    ),
];

const THRESHOLD_STRATEGY: &[F] = &[
    f("enable", "Enable", Ty::Bool, &[]),
    f(
        "cpuSuppressThresholdPercent",
        "CPUSuppressThresholdPercent",
        Ty::Int,
        PCT,
    ),
    f(
        "cpuSuppressMinPercent",
        "CPUSuppressMinPercent",
        Ty::Int,
        PCT,
    ),
    f("cpuSuppressPolicy", "CPUSuppressPolicy", Ty::Any, &[]),
    f(
        "memoryEvictThresholdPercent",
        "MemoryEvictThresholdPercent",
        Ty::Int,
        &[
            Check::Min(0.0),
            Check::Max(100.0),
            Check::GtField("memoryEvictLowerPercent", "MemoryEvictLowerPercent"),
        ],
    ),
    f(
        "memoryEvictLowerPercent",
        "MemoryEvictLowerPercent",
        Ty::Int,
        PCT,
    ),
    f(
        "cpuEvictBESatisfactionUpperPercent",
        "CPUEvictBESatisfactionUpperPercent",
        Ty::Int,
        &[
            Check::Min(0.0),
            Check::Max(100.0),
            Check::GtField(
                "cpuEvictBESatisfactionLowerPercent",
                "CPUEvictBESatisfactionLowerPercent",
            ),
        ],
    ),
    f(
        "cpuEvictBESatisfactionLowerPercent",
        "CPUEvictBESatisfactionLowerPercent",
        Ty::Int,
        &[
            Check::Min(0.0),
            Check::Max(100.0),
            Check::LtField(
                "cpuEvictBESatisfactionUpperPercent",
                "CPUEvictBESatisfactionUpperPercent",
            ),
        ],
    ),
    f(
        "cpuEvictBEUsageThresholdPercent",
        "CPUEvictBEUsageThresholdPercent",
        Ty::Int,
        PCT,
    ),
    f(
        "cpuEvictThresholdPercent",
        "CPUEvictThresholdPercent",
        Ty::Int,
        &[
            Check::Min(0.0),
            Check::Max(100.0),
            Check::GtField("cpuEvictLowerPercent", "CPUEvictLowerPercent"),
        ],
    ),
    f("cpuEvictLowerPercent", "CPUEvictLowerPercent", Ty::Int, PCT),
    f(
        "memoryAllocatableEvictThresholdPercent",
        "MemoryAllocatableEvictThresholdPercent",
        Ty::Int,
        &[
            Check::Min(0.0),
            Check::GtField(
                "memoryAllocatableEvictLowerPercent",
                "MemoryAllocatableEvictLowerPercent",
            ),
        ],
    ),
    f(
        "memoryAllocatableEvictLowerPercent",
        "MemoryAllocatableEvictLowerPercent",
        Ty::Int,
        NONNEG,
    ),
    f(
        "cpuAllocatableEvictThresholdPercent",
        "CPUAllocatableEvictThresholdPercent",
        Ty::Int,
        &[
            Check::Min(0.0),
            Check::GtField(
                "cpuAllocatableEvictLowerPercent",
                "CPUAllocatableEvictLowerPercent",
            ),
        ],
    ),
    f(
        "cpuAllocatableEvictLowerPercent",
        "CPUAllocatableEvictLowerPercent",
        Ty::Int,
        NONNEG,
    ),
    f(
        "cpuEvictTimeWindowSeconds",
        "CPUEvictTimeWindowSeconds",
        Ty::Int,
        &[Check::Gt(0.0)],
    ),
    f("cpuEvictPolicy", "CPUEvictPolicy", Ty::Any, &[]),
    f(
        "allocatableEvictPriorityThreshold",
        "AllocatableEvictPriorityThreshold",
        Ty::Int,
        &[Check::Min(0.0), Check::Max(7999.0)],
    ),
];

const NODE_THRESHOLD: &[F] = &[
    f("", "NodeCfgProfile", Ty::Inline(PROFILE), &[]),
    f(
        "",
        "ResourceThresholdStrategy",
        Ty::Inline(THRESHOLD_STRATEGY),
        &[],
    ),
];

/// `resource-threshold-config` → `ResourceThresholdCfg`.
pub const THRESHOLD: &[F] = &[
    f(
        "clusterStrategy",
        "ClusterStrategy",
        Ty::Obj(THRESHOLD_STRATEGY),
        &[],
    ),
    f(
        "nodeStrategies",
        "NodeStrategies",
        Ty::ObjArr(NODE_THRESHOLD),
        &[],
    ),
];

const CPU_QOS: &[F] = &[
    f(
        "groupIdentity",
        "GroupIdentity",
        Ty::Int,
        &[Check::Min(-1.0), Check::Max(2.0)],
    ),
    f("schedIdle", "SchedIdle", Ty::Int, BIT),
    f("coreExpeller", "CoreExpeller", Ty::Bool, &[]),
];

const MEMORY_QOS: &[F] = &[
    f("minLimitPercent", "MinLimitPercent", Ty::Int, PCT),
    f("lowLimitPercent", "LowLimitPercent", Ty::Int, PCT),
    f("throttlingPercent", "ThrottlingPercent", Ty::Int, PCT),
    f("wmarkRatio", "WmarkRatio", Ty::Int, PCT),
    f(
        "wmarkScalePermill",
        "WmarkScalePermill",
        Ty::Int,
        &[Check::Min(1.0), Check::Max(1000.0)],
    ),
    f(
        "wmarkMinAdj",
        "WmarkMinAdj",
        Ty::Int,
        &[Check::Min(-25.0), Check::Max(50.0)],
    ),
    f("priorityEnable", "PriorityEnable", Ty::Int, BIT),
    f(
        "priority",
        "Priority",
        Ty::Int,
        &[Check::Min(0.0), Check::Max(12.0)],
    ),
    f("oomKillGroup", "OomKillGroup", Ty::Int, BIT),
    f(
        "pageCacheLimitPercent",
        "PageCacheLimitPercent",
        Ty::Int,
        PCT,
    ),
];

const RESCTRL_QOS: &[F] = &[
    f(
        "catRangeStartPercent",
        "CATRangeStartPercent",
        Ty::Int,
        &[
            Check::Min(0.0),
            Check::Max(100.0),
            Check::LtField("catRangeEndPercent", "CATRangeEndPercent"),
        ],
    ),
    f("catRangeEndPercent", "CATRangeEndPercent", Ty::Int, PCT),
    f("mbaPercent", "MBAPercent", Ty::Int, PCT),
];

const NETWORK_QOS: &[F] = &[
    f("ingressRequest", "IngressRequest", Ty::IntOrStr, &[]),
    f("ingressLimit", "IngressLimit", Ty::IntOrStr, &[]),
    f("egressRequest", "EgressRequest", Ty::IntOrStr, &[]),
    f("egressLimit", "EgressLimit", Ty::IntOrStr, &[]),
];

const CPU_QOS_CFG: &[F] = &[
    f("enable", "Enable", Ty::Bool, &[]),
    f("", "CPUQOS", Ty::Inline(CPU_QOS), &[]),
];
const MEMORY_QOS_CFG: &[F] = &[
    f("enable", "Enable", Ty::Bool, &[]),
    f("", "MemoryQOS", Ty::Inline(MEMORY_QOS), &[]),
];
const RESCTRL_QOS_CFG: &[F] = &[
    f("enable", "Enable", Ty::Bool, &[]),
    f("", "ResctrlQOS", Ty::Inline(RESCTRL_QOS), &[]),
];
const NETWORK_QOS_CFG: &[F] = &[
    f("enable", "Enable", Ty::Bool, &[]),
    f("", "NetworkQOS", Ty::Inline(NETWORK_QOS), &[]),
];

const RESOURCE_QOS: &[F] = &[
    f("cpuQOS", "CPUQOS", Ty::Obj(CPU_QOS_CFG), &[]),
    f("memoryQOS", "MemoryQOS", Ty::Obj(MEMORY_QOS_CFG), &[]),
    f("blkioQOS", "BlkIOQOS", Ty::Any, &[]),
    f("resctrlQOS", "ResctrlQOS", Ty::Obj(RESCTRL_QOS_CFG), &[]),
    f("networkQOS", "NetworkQOS", Ty::Obj(NETWORK_QOS_CFG), &[]),
];

const QOS_STRATEGY: &[F] = &[
    f("policies", "Policies", Ty::Any, &[]),
    f("lsrClass", "LSRClass", Ty::Obj(RESOURCE_QOS), &[]),
    f("lsClass", "LSClass", Ty::Obj(RESOURCE_QOS), &[]),
    f("beClass", "BEClass", Ty::Obj(RESOURCE_QOS), &[]),
    f("systemClass", "SystemClass", Ty::Obj(RESOURCE_QOS), &[]),
    f("cgroupRoot", "CgroupRoot", Ty::Obj(RESOURCE_QOS), &[]),
];

const NODE_QOS: &[F] = &[
    f("", "NodeCfgProfile", Ty::Inline(PROFILE), &[]),
    f("", "ResourceQOSStrategy", Ty::Inline(QOS_STRATEGY), &[]),
];

/// `resource-qos-config` → `ResourceQOSCfg`.
pub const QOS: &[F] = &[
    f(
        "clusterStrategy",
        "ClusterStrategy",
        Ty::Obj(QOS_STRATEGY),
        &[],
    ),
    f(
        "nodeStrategies",
        "NodeStrategies",
        Ty::ObjArr(NODE_QOS),
        &[],
    ),
];

const SYSTEM_STRATEGY: &[F] = &[
    f(
        "minFreeKbytesFactor",
        "MinFreeKbytesFactor",
        Ty::Int,
        &[Check::Gt(0.0)],
    ),
    f(
        "watermarkScaleFactor",
        "WatermarkScaleFactor",
        Ty::Int,
        &[Check::Gt(0.0), Check::Max(400.0)],
    ),
    f("memcgReapBackGround", "MemcgReapBackGround", Ty::Int, BIT),
    f(
        "totalNetworkBandwidth",
        "TotalNetworkBandwidth",
        Ty::IntOrStr,
        &[],
    ),
    f(
        "pageCacheLimitEnabled",
        "PageCacheLimitEnabled",
        Ty::Int,
        BIT,
    ),
];

const NODE_SYSTEM: &[F] = &[
    f("", "NodeCfgProfile", Ty::Inline(PROFILE), &[]),
    f("", "SystemStrategy", Ty::Inline(SYSTEM_STRATEGY), &[]),
];

/// `system-config` → `SystemCfg`.
pub const SYSTEM: &[F] = &[
    f(
        "clusterStrategy",
        "ClusterStrategy",
        Ty::Obj(SYSTEM_STRATEGY),
        &[],
    ),
    f(
        "nodeStrategies",
        "NodeStrategies",
        Ty::ObjArr(NODE_SYSTEM),
        &[],
    ),
];

const CPU_BURST_CONFIG: &[F] = &[
    f("policy", "Policy", Ty::Str, &[]),
    f(
        "cpuBurstPercent",
        "CPUBurstPercent",
        Ty::Int,
        &[Check::Min(1.0), Check::Max(10000.0)],
    ),
    f(
        "cfsQuotaBurstPercent",
        "CFSQuotaBurstPercent",
        Ty::Int,
        &[Check::Min(100.0)],
    ),
    f(
        "cfsQuotaBurstPeriodSeconds",
        "CFSQuotaBurstPeriodSeconds",
        Ty::Int,
        &[Check::Min(-1.0)],
    ),
];

const CPU_BURST_STRATEGY: &[F] = &[
    f("", "CPUBurstConfig", Ty::Inline(CPU_BURST_CONFIG), &[]),
    f(
        "sharePoolThresholdPercent",
        "SharePoolThresholdPercent",
        Ty::Int,
        PCT,
    ),
];

const NODE_CPU_BURST: &[F] = &[
    f("", "NodeCfgProfile", Ty::Inline(PROFILE), &[]),
    f("", "CPUBurstStrategy", Ty::Inline(CPU_BURST_STRATEGY), &[]),
];

/// `cpu-burst-config` → `CPUBurstCfg`.
pub const CPU_BURST: &[F] = &[
    f(
        "clusterStrategy",
        "ClusterStrategy",
        Ty::Obj(CPU_BURST_STRATEGY),
        &[],
    ),
    f(
        "nodeStrategies",
        "NodeStrategies",
        Ty::ObjArr(NODE_CPU_BURST),
        &[],
    ),
];
