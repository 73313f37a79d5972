//! The IANA IPFIX Information Elements registry (RFC 7012; elements 1 to
//! 433, the registry's abstract data types): each element's name and type,
//! so that a field declared with an IANA element id is checked to carry
//! that element's type (RFC 7011 section 6) where it is declared. An id
//! the table does not hold (an element registered later) is not checked.

use super::FieldKind;

/// An IANA element's abstract data type (RFC 7012 section 3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IanaType {
    /// unsigned8.
    U8,
    /// unsigned16.
    U16,
    /// unsigned32.
    U32,
    /// unsigned64.
    U64,
    /// float64.
    Float64,
    /// boolean.
    Boolean,
    /// ipv4Address.
    Ipv4,
    /// ipv6Address.
    Ipv6,
    /// macAddress.
    Mac,
    /// octetArray.
    OctetArray,
    /// string.
    String,
    /// dateTimeSeconds.
    Seconds,
    /// dateTimeMilliseconds.
    Milliseconds,
    /// dateTimeMicroseconds.
    Microseconds,
    /// dateTimeNanoseconds.
    Nanoseconds,
}

impl IanaType {
    /// The registry's name of the type (`unsigned16`, `ipv4Address`, ...).
    pub fn name(self) -> &'static str {
        match self {
            IanaType::U8 => "unsigned8",
            IanaType::U16 => "unsigned16",
            IanaType::U32 => "unsigned32",
            IanaType::U64 => "unsigned64",
            IanaType::Float64 => "float64",
            IanaType::Boolean => "boolean",
            IanaType::Ipv4 => "ipv4Address",
            IanaType::Ipv6 => "ipv6Address",
            IanaType::Mac => "macAddress",
            IanaType::OctetArray => "octetArray",
            IanaType::String => "string",
            IanaType::Seconds => "dateTimeSeconds",
            IanaType::Milliseconds => "dateTimeMilliseconds",
            IanaType::Microseconds => "dateTimeMicroseconds",
            IanaType::Nanoseconds => "dateTimeNanoseconds",
        }
    }
}

/// The name and type of IANA element `id`, if the table holds it.
///
/// # Examples
/// ```
/// use dplog_core::schema::{iana_element, IanaType};
/// assert_eq!(iana_element(7), Some(("sourceTransportPort", IanaType::U16)));
/// assert_eq!(iana_element(0), None);
/// ```
pub fn iana_element(id: u16) -> Option<(&'static str, IanaType)> {
    ELEMENTS
        .binary_search_by_key(&id, |e| e.0)
        .ok()
        .map(|i| (ELEMENTS[i].1, ELEMENTS[i].2))
}

/// Why a field of `kind` and `size` bytes cannot be exported as an element
/// of type `t`; `None` if it can. A field carries:
/// - an unsignedN element if it is an unsigned integer (any unsigned kind,
///   port, protocol, enum) of at most N/8 bytes (RFC 7011 section 6.2's
///   reduced-size encoding shortens, never widens);
/// - boolean if it is a `Bool`;
/// - ipv4Address if it is an `Ipv4` or a 4-byte unsigned (sent in network
///   order), or 4 bytes;
/// - ipv6Address and macAddress if it is an `Ipv6` or `Mac`, or bytes of
///   that length (16, 6);
/// - octetArray and string if it is bytes;
/// - dateTimeSeconds and dateTimeMilliseconds if it is a timestamp (sent
///   in the element's unit) or an unsigned integer of the element's size
///   (4, 8) holding that unit;
/// - dateTimeMicroseconds and dateTimeNanoseconds if it is a timestamp;
/// - float64: no field kind.
pub fn iana_type_fit(kind: FieldKind, size: usize, t: IanaType) -> Option<&'static str> {
    let class = super::ipfix_type_class(kind);
    let unsigned = class == "unsigned";
    let timestamp = class == "dateTime";
    let bytes = class == "octetArray";
    let fits = match t {
        IanaType::U8 | IanaType::U16 | IanaType::U32 | IanaType::U64 => {
            let width = match t {
                IanaType::U8 => 1,
                IanaType::U16 => 2,
                IanaType::U32 => 4,
                _ => 8,
            };
            if unsigned && size > width {
                return Some(
                    "the field is wider than the element (reduced-size encoding only shortens)",
                );
            }
            unsigned
        }
        IanaType::Boolean => kind == FieldKind::Bool,
        IanaType::Ipv4 => kind == FieldKind::Ipv4 || ((unsigned || bytes) && size == 4),
        IanaType::Ipv6 => kind == FieldKind::Ipv6 || (bytes && size == 16),
        IanaType::Mac => kind == FieldKind::Mac || (bytes && size == 6),
        IanaType::OctetArray | IanaType::String => bytes,
        IanaType::Seconds => timestamp || (unsigned && size == 4),
        IanaType::Milliseconds => timestamp || (unsigned && size == 8),
        IanaType::Microseconds | IanaType::Nanoseconds => timestamp,
        IanaType::Float64 => false,
    };
    (!fits).then_some("the field's kind is not the element's type")
}

use IanaType as T;

/// (id, name, type), by id.
static ELEMENTS: &[(u16, &str, IanaType)] = &[
    (1, "octetDeltaCount", T::U64),
    (2, "packetDeltaCount", T::U64),
    (3, "deltaFlowCount", T::U64),
    (4, "protocolIdentifier", T::U8),
    (5, "ipClassOfService", T::U8),
    (6, "tcpControlBits", T::U16),
    (7, "sourceTransportPort", T::U16),
    (8, "sourceIPv4Address", T::Ipv4),
    (9, "sourceIPv4PrefixLength", T::U8),
    (10, "ingressInterface", T::U32),
    (11, "destinationTransportPort", T::U16),
    (12, "destinationIPv4Address", T::Ipv4),
    (13, "destinationIPv4PrefixLength", T::U8),
    (14, "egressInterface", T::U32),
    (15, "ipNextHopIPv4Address", T::Ipv4),
    (16, "bgpSourceAsNumber", T::U32),
    (17, "bgpDestinationAsNumber", T::U32),
    (18, "bgpNextHopIPv4Address", T::Ipv4),
    (19, "postMCastPacketDeltaCount", T::U64),
    (20, "postMCastOctetDeltaCount", T::U64),
    (21, "flowEndSysUpTime", T::U32),
    (22, "flowStartSysUpTime", T::U32),
    (23, "postOctetDeltaCount", T::U64),
    (24, "postPacketDeltaCount", T::U64),
    (25, "minimumIpTotalLength", T::U64),
    (26, "maximumIpTotalLength", T::U64),
    (27, "sourceIPv6Address", T::Ipv6),
    (28, "destinationIPv6Address", T::Ipv6),
    (29, "sourceIPv6PrefixLength", T::U8),
    (30, "destinationIPv6PrefixLength", T::U8),
    (31, "flowLabelIPv6", T::U32),
    (32, "icmpTypeCodeIPv4", T::U16),
    (33, "igmpType", T::U8),
    (34, "samplingInterval", T::U32),
    (35, "samplingAlgorithm", T::U8),
    (36, "flowActiveTimeout", T::U16),
    (37, "flowIdleTimeout", T::U16),
    (38, "engineType", T::U8),
    (39, "engineId", T::U8),
    (40, "exportedOctetTotalCount", T::U64),
    (41, "exportedMessageTotalCount", T::U64),
    (42, "exportedFlowRecordTotalCount", T::U64),
    (43, "ipv4RouterSc", T::Ipv4),
    (44, "sourceIPv4Prefix", T::Ipv4),
    (45, "destinationIPv4Prefix", T::Ipv4),
    (46, "mplsTopLabelType", T::U8),
    (47, "mplsTopLabelIPv4Address", T::Ipv4),
    (48, "samplerId", T::U8),
    (49, "samplerMode", T::U8),
    (50, "samplerRandomInterval", T::U32),
    (51, "classId", T::U8),
    (52, "minimumTTL", T::U8),
    (53, "maximumTTL", T::U8),
    (54, "fragmentIdentification", T::U32),
    (55, "postIpClassOfService", T::U8),
    (56, "sourceMacAddress", T::Mac),
    (57, "postDestinationMacAddress", T::Mac),
    (58, "vlanId", T::U16),
    (59, "postVlanId", T::U16),
    (60, "ipVersion", T::U8),
    (61, "flowDirection", T::U8),
    (62, "ipNextHopIPv6Address", T::Ipv6),
    (63, "bgpNextHopIPv6Address", T::Ipv6),
    (64, "ipv6ExtensionHeaders", T::U32),
    (70, "mplsTopLabelStackSection", T::OctetArray),
    (71, "mplsLabelStackSection2", T::OctetArray),
    (72, "mplsLabelStackSection3", T::OctetArray),
    (73, "mplsLabelStackSection4", T::OctetArray),
    (74, "mplsLabelStackSection5", T::OctetArray),
    (75, "mplsLabelStackSection6", T::OctetArray),
    (76, "mplsLabelStackSection7", T::OctetArray),
    (77, "mplsLabelStackSection8", T::OctetArray),
    (78, "mplsLabelStackSection9", T::OctetArray),
    (79, "mplsLabelStackSection10", T::OctetArray),
    (80, "destinationMacAddress", T::Mac),
    (81, "postSourceMacAddress", T::Mac),
    (82, "interfaceName", T::String),
    (83, "interfaceDescription", T::String),
    (84, "samplerName", T::String),
    (85, "octetTotalCount", T::U64),
    (86, "packetTotalCount", T::U64),
    (87, "flagsAndSamplerId", T::U32),
    (88, "fragmentOffset", T::U16),
    (89, "forwardingStatus", T::U32),
    (90, "mplsVpnRouteDistinguisher", T::OctetArray),
    (91, "mplsTopLabelPrefixLength", T::U8),
    (92, "srcTrafficIndex", T::U32),
    (93, "dstTrafficIndex", T::U32),
    (94, "applicationDescription", T::String),
    (95, "applicationId", T::OctetArray),
    (96, "applicationName", T::String),
    (98, "postIpDiffServCodePoint", T::U8),
    (99, "multicastReplicationFactor", T::U32),
    (100, "className", T::String),
    (101, "classificationEngineId", T::U8),
    (102, "layer2packetSectionOffset", T::U16),
    (103, "layer2packetSectionSize", T::U16),
    (104, "layer2packetSectionData", T::OctetArray),
    (128, "bgpNextAdjacentAsNumber", T::U32),
    (129, "bgpPrevAdjacentAsNumber", T::U32),
    (130, "exporterIPv4Address", T::Ipv4),
    (131, "exporterIPv6Address", T::Ipv6),
    (132, "droppedOctetDeltaCount", T::U64),
    (133, "droppedPacketDeltaCount", T::U64),
    (134, "droppedOctetTotalCount", T::U64),
    (135, "droppedPacketTotalCount", T::U64),
    (136, "flowEndReason", T::U8),
    (137, "commonPropertiesId", T::U64),
    (138, "observationPointId", T::U64),
    (139, "icmpTypeCodeIPv6", T::U16),
    (140, "mplsTopLabelIPv6Address", T::Ipv6),
    (141, "lineCardId", T::U32),
    (142, "portId", T::U32),
    (143, "meteringProcessId", T::U32),
    (144, "exportingProcessId", T::U32),
    (145, "templateId", T::U16),
    (146, "wlanChannelId", T::U8),
    (147, "wlanSSID", T::String),
    (148, "flowId", T::U64),
    (149, "observationDomainId", T::U32),
    (150, "flowStartSeconds", T::Seconds),
    (151, "flowEndSeconds", T::Seconds),
    (152, "flowStartMilliseconds", T::Milliseconds),
    (153, "flowEndMilliseconds", T::Milliseconds),
    (154, "flowStartMicroseconds", T::Microseconds),
    (155, "flowEndMicroseconds", T::Microseconds),
    (156, "flowStartNanoseconds", T::Nanoseconds),
    (157, "flowEndNanoseconds", T::Nanoseconds),
    (158, "flowStartDeltaMicroseconds", T::U32),
    (159, "flowEndDeltaMicroseconds", T::U32),
    (160, "systemInitTimeMilliseconds", T::Milliseconds),
    (161, "flowDurationMilliseconds", T::U32),
    (162, "flowDurationMicroseconds", T::U32),
    (163, "observedFlowTotalCount", T::U64),
    (164, "ignoredPacketTotalCount", T::U64),
    (165, "ignoredOctetTotalCount", T::U64),
    (166, "notSentFlowTotalCount", T::U64),
    (167, "notSentPacketTotalCount", T::U64),
    (168, "notSentOctetTotalCount", T::U64),
    (169, "destinationIPv6Prefix", T::Ipv6),
    (170, "sourceIPv6Prefix", T::Ipv6),
    (171, "postOctetTotalCount", T::U64),
    (172, "postPacketTotalCount", T::U64),
    (173, "flowKeyIndicator", T::U64),
    (174, "postMCastPacketTotalCount", T::U64),
    (175, "postMCastOctetTotalCount", T::U64),
    (176, "icmpTypeIPv4", T::U8),
    (177, "icmpCodeIPv4", T::U8),
    (178, "icmpTypeIPv6", T::U8),
    (179, "icmpCodeIPv6", T::U8),
    (180, "udpSourcePort", T::U16),
    (181, "udpDestinationPort", T::U16),
    (182, "tcpSourcePort", T::U16),
    (183, "tcpDestinationPort", T::U16),
    (184, "tcpSequenceNumber", T::U32),
    (185, "tcpAcknowledgementNumber", T::U32),
    (186, "tcpWindowSize", T::U16),
    (187, "tcpUrgentPointer", T::U16),
    (188, "tcpHeaderLength", T::U8),
    (189, "ipHeaderLength", T::U8),
    (190, "totalLengthIPv4", T::U16),
    (191, "payloadLengthIPv6", T::U16),
    (192, "ipTTL", T::U8),
    (193, "nextHeaderIPv6", T::U8),
    (194, "mplsPayloadLength", T::U32),
    (195, "ipDiffServCodePoint", T::U8),
    (196, "ipPrecedence", T::U8),
    (197, "fragmentFlags", T::U8),
    (198, "octetDeltaSumOfSquares", T::U64),
    (199, "octetTotalSumOfSquares", T::U64),
    (200, "mplsTopLabelTTL", T::U8),
    (201, "mplsLabelStackLength", T::U32),
    (202, "mplsLabelStackDepth", T::U32),
    (203, "mplsTopLabelExp", T::U8),
    (204, "ipPayloadLength", T::U32),
    (205, "udpMessageLength", T::U16),
    (206, "isMulticast", T::U8),
    (207, "ipv4IHL", T::U8),
    (208, "ipv4Options", T::U32),
    (209, "tcpOptions", T::U64),
    (210, "paddingOctets", T::OctetArray),
    (211, "collectorIPv4Address", T::Ipv4),
    (212, "collectorIPv6Address", T::Ipv6),
    (213, "exportInterface", T::U32),
    (214, "exportProtocolVersion", T::U8),
    (215, "exportTransportProtocol", T::U8),
    (216, "collectorTransportPort", T::U16),
    (217, "exporterTransportPort", T::U16),
    (218, "tcpSynTotalCount", T::U64),
    (219, "tcpFinTotalCount", T::U64),
    (220, "tcpRstTotalCount", T::U64),
    (221, "tcpPshTotalCount", T::U64),
    (222, "tcpAckTotalCount", T::U64),
    (223, "tcpUrgTotalCount", T::U64),
    (224, "ipTotalLength", T::U64),
    (225, "postNATSourceIPv4Address", T::Ipv4),
    (226, "postNATDestinationIPv4Address", T::Ipv4),
    (227, "postNAPTSourceTransportPort", T::U16),
    (228, "postNAPTDestinationTransportPort", T::U16),
    (229, "natOriginatingAddressRealm", T::U8),
    (230, "natEvent", T::U8),
    (231, "initiatorOctets", T::U64),
    (232, "responderOctets", T::U64),
    (233, "firewallEvent", T::U8),
    (234, "ingressVRFID", T::U32),
    (235, "egressVRFID", T::U32),
    (236, "VRFname", T::String),
    (237, "postMplsTopLabelExp", T::U8),
    (238, "tcpWindowScale", T::U16),
    (239, "biflowDirection", T::U8),
    (240, "ethernetHeaderLength", T::U8),
    (241, "ethernetPayloadLength", T::U16),
    (242, "ethernetTotalLength", T::U16),
    (243, "dot1qVlanId", T::U16),
    (244, "dot1qPriority", T::U8),
    (245, "dot1qCustomerVlanId", T::U16),
    (246, "dot1qCustomerPriority", T::U8),
    (247, "metroEvcId", T::String),
    (248, "metroEvcType", T::U8),
    (249, "pseudoWireId", T::U32),
    (250, "pseudoWireType", T::U16),
    (251, "pseudoWireControlWord", T::U32),
    (252, "ingressPhysicalInterface", T::U32),
    (253, "egressPhysicalInterface", T::U32),
    (254, "postDot1qVlanId", T::U16),
    (255, "postDot1qCustomerVlanId", T::U16),
    (256, "ethernetType", T::U16),
    (257, "postIpPrecedence", T::U8),
    (258, "collectionTimeMilliseconds", T::Milliseconds),
    (259, "exportSctpStreamId", T::U16),
    (260, "maxExportSeconds", T::Seconds),
    (261, "maxFlowEndSeconds", T::Seconds),
    (262, "messageMD5Checksum", T::OctetArray),
    (263, "messageScope", T::U8),
    (264, "minExportSeconds", T::Seconds),
    (265, "minFlowStartSeconds", T::Seconds),
    (266, "opaqueOctets", T::OctetArray),
    (267, "sessionScope", T::U8),
    (268, "maxFlowEndMicroseconds", T::Microseconds),
    (269, "maxFlowEndMilliseconds", T::Milliseconds),
    (270, "maxFlowEndNanoseconds", T::Nanoseconds),
    (271, "minFlowStartMicroseconds", T::Microseconds),
    (272, "minFlowStartMilliseconds", T::Milliseconds),
    (273, "minFlowStartNanoseconds", T::Nanoseconds),
    (274, "collectorCertificate", T::OctetArray),
    (275, "exporterCertificate", T::OctetArray),
    (276, "dataRecordsReliability", T::Boolean),
    (277, "observationPointType", T::U8),
    (278, "connectionCountNew", T::U32),
    (279, "connectionSumDurationSeconds", T::U64),
    (280, "connectionTransactionId", T::U64),
    (281, "postNATSourceIPv6Address", T::Ipv6),
    (282, "postNATDestinationIPv6Address", T::Ipv6),
    (283, "natPoolId", T::U32),
    (284, "natPoolName", T::String),
    (285, "anonymizationFlags", T::U16),
    (286, "anonymizationTechnique", T::U16),
    (287, "informationElementIndex", T::U16),
    (288, "p2pTechnology", T::String),
    (289, "tunnelTechnology", T::String),
    (290, "encryptedTechnology", T::String),
    (294, "bgpValidityState", T::U8),
    (295, "IPSecSPI", T::U32),
    (296, "greKey", T::U32),
    (297, "natType", T::U8),
    (298, "initiatorPackets", T::U64),
    (299, "responderPackets", T::U64),
    (300, "observationDomainName", T::String),
    (301, "selectionSequenceId", T::U64),
    (302, "selectorId", T::U64),
    (303, "informationElementId", T::U16),
    (304, "selectorAlgorithm", T::U16),
    (305, "samplingPacketInterval", T::U32),
    (306, "samplingPacketSpace", T::U32),
    (307, "samplingTimeInterval", T::U32),
    (308, "samplingTimeSpace", T::U32),
    (309, "samplingSize", T::U32),
    (310, "samplingPopulation", T::U32),
    (311, "samplingProbability", T::Float64),
    (312, "dataLinkFrameSize", T::U16),
    (313, "ipHeaderPacketSection", T::OctetArray),
    (314, "ipPayloadPacketSection", T::OctetArray),
    (315, "dataLinkFrameSection", T::OctetArray),
    (316, "mplsLabelStackSection", T::OctetArray),
    (317, "mplsPayloadPacketSection", T::OctetArray),
    (318, "selectorIdTotalPktsObserved", T::U64),
    (319, "selectorIdTotalPktsSelected", T::U64),
    (320, "absoluteError", T::Float64),
    (321, "relativeError", T::Float64),
    (322, "observationTimeSeconds", T::Seconds),
    (323, "observationTimeMilliseconds", T::Milliseconds),
    (324, "observationTimeMicroseconds", T::Microseconds),
    (325, "observationTimeNanoseconds", T::Nanoseconds),
    (326, "digestHashValue", T::U64),
    (327, "hashIPPayloadOffset", T::U64),
    (328, "hashIPPayloadSize", T::U64),
    (329, "hashOutputRangeMin", T::U64),
    (330, "hashOutputRangeMax", T::U64),
    (331, "hashSelectedRangeMin", T::U64),
    (332, "hashSelectedRangeMax", T::U64),
    (333, "hashDigestOutput", T::Boolean),
    (334, "hashInitialiserValue", T::U64),
    (335, "selectorName", T::String),
    (336, "upperCILimit", T::Float64),
    (337, "lowerCILimit", T::Float64),
    (338, "confidenceLevel", T::Float64),
    (339, "informationElementDataType", T::U8),
    (340, "informationElementDescription", T::String),
    (341, "informationElementName", T::String),
    (342, "informationElementRangeBegin", T::U64),
    (343, "informationElementRangeEnd", T::U64),
    (344, "informationElementSemantics", T::U8),
    (345, "informationElementUnits", T::U16),
    (346, "privateEnterpriseNumber", T::U32),
    (347, "virtualStationInterfaceId", T::OctetArray),
    (348, "virtualStationInterfaceName", T::String),
    (349, "virtualStationUUID", T::OctetArray),
    (350, "virtualStationName", T::String),
    (351, "layer2SegmentId", T::U64),
    (352, "layer2OctetDeltaCount", T::U64),
    (353, "layer2OctetTotalCount", T::U64),
    (354, "ingressUnicastPacketTotalCount", T::U64),
    (355, "ingressMulticastPacketTotalCount", T::U64),
    (356, "ingressBroadcastPacketTotalCount", T::U64),
    (357, "egressUnicastPacketTotalCount", T::U64),
    (358, "egressBroadcastPacketTotalCount", T::U64),
    (359, "monitoringIntervalStartMilliSeconds", T::Milliseconds),
    (360, "monitoringIntervalEndMilliSeconds", T::Milliseconds),
    (361, "portRangeStart", T::U16),
    (362, "portRangeEnd", T::U16),
    (363, "portRangeStepSize", T::U16),
    (364, "portRangeNumPorts", T::U16),
    (365, "staMacAddress", T::Mac),
    (366, "staIPv4Address", T::Ipv4),
    (367, "wtpMacAddress", T::Mac),
    (368, "ingressInterfaceType", T::U32),
    (369, "egressInterfaceType", T::U32),
    (370, "rtpSequenceNumber", T::U16),
    (371, "userName", T::String),
    (372, "applicationCategoryName", T::String),
    (373, "applicationSubCategoryName", T::String),
    (374, "applicationGroupName", T::String),
    (375, "originalFlowsPresent", T::U64),
    (376, "originalFlowsInitiated", T::U64),
    (377, "originalFlowsCompleted", T::U64),
    (378, "distinctCountOfSourceIPAddress", T::U64),
    (379, "distinctCountOfDestinationIPAddress", T::U64),
    (380, "distinctCountOfSourceIPv4Address", T::U32),
    (381, "distinctCountOfDestinationIPv4Address", T::U32),
    (382, "distinctCountOfSourceIPv6Address", T::U64),
    (383, "distinctCountOfDestinationIPv6Address", T::U64),
    (384, "valueDistributionMethod", T::U8),
    (385, "rfc3550JitterMilliseconds", T::U32),
    (386, "rfc3550JitterMicroseconds", T::U32),
    (387, "rfc3550JitterNanoseconds", T::U32),
    (388, "dot1qDEI", T::Boolean),
    (389, "dot1qCustomerDEI", T::Boolean),
    (390, "flowSelectorAlgorithm", T::U16),
    (391, "flowSelectedOctetDeltaCount", T::U64),
    (392, "flowSelectedPacketDeltaCount", T::U64),
    (393, "flowSelectedFlowDeltaCount", T::U64),
    (394, "selectorIDTotalFlowsObserved", T::U64),
    (395, "selectorIDTotalFlowsSelected", T::U64),
    (396, "samplingFlowInterval", T::U64),
    (397, "samplingFlowSpacing", T::U64),
    (398, "flowSamplingTimeInterval", T::U64),
    (399, "flowSamplingTimeSpacing", T::U64),
    (400, "hashFlowDomain", T::U16),
    (401, "transportOctetDeltaCount", T::U64),
    (402, "transportPacketDeltaCount", T::U64),
    (403, "originalExporterIPv4Address", T::Ipv4),
    (404, "originalExporterIPv6Address", T::Ipv6),
    (405, "originalObservationDomainId", T::U32),
    (406, "intermediateProcessId", T::U32),
    (407, "ignoredDataRecordTotalCount", T::U64),
    (408, "dataLinkFrameType", T::U16),
    (409, "sectionOffset", T::U16),
    (410, "sectionExportedOctets", T::U16),
    (411, "dot1qServiceInstanceTag", T::OctetArray),
    (412, "dot1qServiceInstanceId", T::U32),
    (413, "dot1qServiceInstancePriority", T::U8),
    (414, "dot1qCustomerSourceMacAddress", T::Mac),
    (415, "dot1qCustomerDestinationMacAddress", T::Mac),
    (417, "postLayer2OctetDeltaCount", T::U64),
    (418, "postMCastLayer2OctetDeltaCount", T::U64),
    (420, "postLayer2OctetTotalCount", T::U64),
    (421, "postMCastLayer2OctetTotalCount", T::U64),
    (422, "minimumLayer2TotalLength", T::U64),
    (423, "maximumLayer2TotalLength", T::U64),
    (424, "droppedLayer2OctetDeltaCount", T::U64),
    (425, "droppedLayer2OctetTotalCount", T::U64),
    (426, "ignoredLayer2OctetTotalCount", T::U64),
    (427, "notSentLayer2OctetTotalCount", T::U64),
    (428, "layer2OctetDeltaSumOfSquares", T::U64),
    (429, "layer2OctetTotalSumOfSquares", T::U64),
    (430, "layer2FrameDeltaCount", T::U64),
    (431, "layer2FrameTotalCount", T::U64),
    (432, "pseudoWireDestinationIPv4Address", T::Ipv4),
    (433, "ignoredLayer2FrameTotalCount", T::U64),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_by_id_and_holds_the_elements_dplog_exports() {
        assert!(ELEMENTS.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(iana_element(8), Some(("sourceIPv4Address", T::Ipv4)));
        assert_eq!(iana_element(230), Some(("natEvent", T::U8)));
        assert_eq!(
            iana_element(323),
            Some(("observationTimeMilliseconds", T::Milliseconds))
        );
        assert_eq!(
            iana_element(325),
            Some(("observationTimeNanoseconds", T::Nanoseconds))
        );
        assert_eq!(iana_element(434), None);
    }

    #[test]
    fn fields_fit_elements_of_their_type_and_width_only() {
        use FieldKind as K;
        assert_eq!(iana_type_fit(K::Port, 2, T::U16), None);
        assert_eq!(iana_type_fit(K::U32, 4, T::U64), None, "reduced size");
        assert!(
            iana_type_fit(K::U32, 4, T::U16).is_some(),
            "wider than the element"
        );
        assert!(iana_type_fit(K::Bytes, 20, T::U16).is_some());
        assert_eq!(iana_type_fit(K::U32, 4, T::Ipv4), None);
        assert!(iana_type_fit(K::U64, 8, T::Ipv4).is_some());
        assert_eq!(iana_type_fit(K::Bytes, 6, T::Mac), None);
        assert!(iana_type_fit(K::Bytes, 8, T::Mac).is_some());
        assert_eq!(iana_type_fit(K::NsTimestamp, 8, T::Nanoseconds), None);
        assert_eq!(iana_type_fit(K::U64, 8, T::Milliseconds), None);
        assert!(iana_type_fit(K::U64, 8, T::Nanoseconds).is_some());
        assert!(iana_type_fit(K::Bool, 1, T::U8).is_some());
        assert!(iana_type_fit(K::U64, 8, T::Float64).is_some());
    }
}
