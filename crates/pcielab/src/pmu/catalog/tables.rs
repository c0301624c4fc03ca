//! The event tables themselves, one per PMU family, as data: each event's name (and the
//! seed's or upstream driver's spelling), its `config` encoding, group, unit and meaning.

use super::event::{EventDef, Group, Unit};

/// DWC `config` layout: eventid bits 0-15, type bits 16-19 (0 time-based, 1 lane event).
const fn dwc_time(eventid: u64) -> u64 {
    eventid
}

const fn dwc_lane(group: u64, number: u64) -> u64 {
    (1 << 16) | (group << 8) | number
}

macro_rules! time_event {
    ($group:expr, $id:expr, $name:expr, $seed:expr, $unit:expr, $desc:expr) => {
        EventDef {
            name: $name,
            seed_name: $seed,
            config: dwc_time($id),
            group: Group::TimeBased($group),
            unit: $unit,
            description: $desc,
        }
    };
}

macro_rules! lane_event {
    ($group:expr, $num:expr, $name:expr, $seed:expr, $desc:expr) => {
        EventDef {
            name: $name,
            seed_name: $seed,
            config: dwc_lane($group, $num),
            group: Group::Lane($group),
            unit: Unit::Events,
            description: $desc,
        }
    };
}

/// The DesignWare root-port PMU, named as the newest upstream driver names it (a kernel's own
/// names: `kernel::dwc_name_in`). Time-based 0x08 is L1 aux and 0x09 Tx-and-Rx L0s, as the
/// databook, the Yitian 710 PMU guide and kernels since 6.14 number them (6.8-6.13 named them the
/// other way round, programming the same hardware events). Event groups 0-5 are in the guide
/// only (no upstream driver exposes them); they use the same `group << 8 | number` encoding.
pub(crate) static DWC_EVENTS: &[EventDef] = &[
    time_event!(
        0,
        0x00,
        "one_cycle",
        "One_Cycle",
        Unit::Cycles,
        "every controller cycle: the measurement window"
    ),
    time_event!(
        0,
        0x01,
        "TX_L0S",
        "Tx_L0s",
        Unit::Cycles,
        "cycles with the transmitter in L0s"
    ),
    time_event!(
        0,
        0x02,
        "RX_L0S",
        "Rx_L0s",
        Unit::Cycles,
        "cycles with the receiver in L0s"
    ),
    time_event!(0, 0x03, "L0", "L0", Unit::Cycles, "cycles in L0"),
    time_event!(0, 0x04, "L1", "L1", Unit::Cycles, "cycles in L1 (core_clk)"),
    time_event!(0, 0x05, "L1_1", "L1.1", Unit::Cycles, "cycles in L1.1"),
    time_event!(0, 0x06, "L1_2", "L1.2", Unit::Cycles, "cycles in L1.2"),
    time_event!(
        0,
        0x07,
        "CFG_RCVRY",
        "Configuration_Recovery",
        Unit::Cycles,
        "cycles in Configuration or Recovery"
    ),
    time_event!(
        0,
        0x08,
        "L1_AUX",
        "L1_aux",
        Unit::Cycles,
        "cycles in L1 counted on aux_clk"
    ),
    time_event!(
        0,
        0x09,
        "TX_RX_L0S",
        "Tx_L0s_and_Rx_L0s",
        Unit::Cycles,
        "cycles with both directions in L0s"
    ),
    time_event!(
        1,
        0x20,
        "tx_pcie_tlp_data_payload",
        "Tx_PCIe_TLP_Data_Payload",
        Unit::Bytes(16),
        "TLP data payload sent downstream, 16-byte units"
    ),
    time_event!(
        1,
        0x21,
        "rx_pcie_tlp_data_payload",
        "Rx_PCIe_TLP_Data_Payload",
        Unit::Bytes(16),
        "TLP data payload received from downstream, 16-byte units"
    ),
    time_event!(
        1,
        0x22,
        "tx_ccix_tlp_data_payload",
        "Tx_CCIX_TLP_Data_Payload",
        Unit::Bytes(16),
        "CCIX TLP data payload sent, 16-byte units"
    ),
    time_event!(
        1,
        0x23,
        "rx_ccix_tlp_data_payload",
        "Rx_CCIX_TLP_Data_Payload",
        Unit::Bytes(16),
        "CCIX TLP data payload received, 16-byte units"
    ),
    // Event group 0: 4-bit Layer-1 error counters, per lane.
    lane_event!(
        0,
        0x00,
        "ebuf_overflow",
        "EBUF_Overflow",
        "elastic buffer overflow"
    ),
    lane_event!(
        0,
        0x01,
        "ebuf_underrun",
        "EBUF_Underrun",
        "elastic buffer under-run"
    ),
    lane_event!(
        0,
        0x02,
        "decode_error",
        "Decode_Error",
        "8b/10b decode error"
    ),
    lane_event!(
        0,
        0x03,
        "running_disparity_error",
        "Running_Disparity_Error",
        "8b/10b running disparity error"
    ),
    lane_event!(
        0,
        0x04,
        "skp_os_parity_error",
        "SKP_OS_Parity_Error",
        "SKP ordered-set parity error (Gen3)"
    ),
    lane_event!(
        0,
        0x05,
        "sync_header_error",
        "SYNC_Header_Error",
        "128b/130b sync header error (Gen3+)"
    ),
    lane_event!(
        0,
        0x06,
        "rx_valid_deassertion",
        "Rx_Valid_Deassertion",
        "RxValid de-asserted without EIOS"
    ),
    lane_event!(
        0,
        0x07,
        "ctl_skp_os_parity_error",
        "CTL_SKP_OS_Parity_Error",
        "control SKP ordered-set parity error (Gen4)"
    ),
    lane_event!(
        0,
        0x08,
        "retimer1_parity_error",
        "1st_Retimer_Parity_Error",
        "first retimer parity error (Gen4)"
    ),
    lane_event!(
        0,
        0x09,
        "retimer2_parity_error",
        "2nd_Retimer_Parity_Error",
        "second retimer parity error (Gen4)"
    ),
    lane_event!(
        0,
        0x0A,
        "margin_crc_parity_error",
        "Margin_CRC_and_Parity_Error",
        "lane margining CRC/parity error (Gen4)"
    ),
    // Event group 1: 8-bit Layer-1 error counters, common lane (0x00-0x04 reserved).
    lane_event!(
        1,
        0x05,
        "detect_ei_infer",
        "Detect_EI_Infer",
        "electrical idle inferred"
    ),
    lane_event!(
        1,
        0x06,
        "receiver_error",
        "Receiver_Error",
        "receiver error"
    ),
    lane_event!(
        1,
        0x07,
        "rx_recovery_request",
        "Rx_Recovery_Request",
        "TS1 received in L0s"
    ),
    lane_event!(
        1,
        0x08,
        "n_fts_timeout",
        "N_FTS_Timeout",
        "timeout in Rx_L0s.FTS"
    ),
    lane_event!(
        1,
        0x09,
        "framing_error",
        "Framing_Error",
        "framing error (Gen3)"
    ),
    lane_event!(1, 0x0A, "deskew_error", "Deskew_Error", "lane deskew error"),
    // Event group 2: 8-bit Layer-2 error counters.
    lane_event!(
        2,
        0x00,
        "bad_tlp",
        "BAD_TLP",
        "TLP dropped by the data link layer (LCRC or sequence error)"
    ),
    lane_event!(
        2,
        0x01,
        "lcrc_error",
        "LCRC_Error",
        "received TLP with an LCRC error"
    ),
    lane_event!(
        2,
        0x02,
        "bad_dllp",
        "BAD_DLLP",
        "received DLLP with a CRC error"
    ),
    lane_event!(
        2,
        0x03,
        "replay_number_rollover",
        "Replay_Number_Rollover",
        "REPLAY_NUM rolled over (link retrains)"
    ),
    lane_event!(
        2,
        0x04,
        "replay_timeout",
        "Replay_Timeout",
        "replay timer expired"
    ),
    lane_event!(
        2,
        0x05,
        "rx_nak_dllp",
        "Rx_Nak_DLLP",
        "Nak DLLP received (the partner saw a bad TLP)"
    ),
    lane_event!(
        2,
        0x06,
        "tx_nak_dllp",
        "Tx_Nak_DLLP",
        "Nak DLLP sent (this port saw a bad TLP)"
    ),
    lane_event!(
        2,
        0x07,
        "retry_tlp",
        "Retry_TLP",
        "TLP retransmitted from the replay buffer"
    ),
    // Event group 3: 8-bit Layer-3 error counters.
    lane_event!(
        3,
        0x00,
        "fc_timeout",
        "FC_Timeout",
        "flow-control update timeout"
    ),
    lane_event!(
        3,
        0x01,
        "poisoned_tlp",
        "Poisoned_TLP",
        "poisoned TLP received"
    ),
    lane_event!(3, 0x02, "ecrc_error", "ECRC_Error", "end-to-end CRC error"),
    lane_event!(
        3,
        0x03,
        "unsupported_request",
        "Unsupported_Request",
        "unsupported request"
    ),
    lane_event!(
        3,
        0x04,
        "completer_abort",
        "Completer_Abort",
        "completer abort"
    ),
    lane_event!(
        3,
        0x05,
        "completion_timeout",
        "Completion_Timeout",
        "completion timeout"
    ),
    // Event group 4: 4-bit Layer-1 non-error counters, per lane.
    lane_event!(
        4,
        0x00,
        "ebuf_skp_add",
        "EBUF_SKP_Add",
        "elastic buffer added a SKP symbol"
    ),
    lane_event!(
        4,
        0x01,
        "ebuf_skp_del",
        "EBUF_SKP_Del",
        "elastic buffer deleted a SKP symbol"
    ),
    // Event group 5: 32-bit Layer-1 non-error counters.
    lane_event!(
        5,
        0x00,
        "l0_to_recovery_entry",
        "L0_to_Recovery_Entry",
        "L0 to Recovery entries"
    ),
    lane_event!(
        5,
        0x01,
        "l1_to_recovery_entry",
        "L1_to_Recovery_Entry",
        "L1 to Recovery entries"
    ),
    lane_event!(
        5,
        0x02,
        "tx_l0s_entry",
        "Tx_L0s_Entry",
        "transmitter L0s entries"
    ),
    lane_event!(
        5,
        0x03,
        "rx_l0s_entry",
        "Rx_L0s_Entry",
        "receiver L0s entries"
    ),
    lane_event!(
        5,
        0x04,
        "aspm_l1_reject",
        "ASPM_L1_Reject",
        "PM_Active_State_Nak sent"
    ),
    lane_event!(5, 0x05, "l1_entry", "L1_Entry", "L1 entries"),
    lane_event!(
        5,
        0x06,
        "l1_cpm",
        "L1_CPM",
        "L1 clock power management entries"
    ),
    lane_event!(5, 0x07, "l1_1_entry", "L1.1_Entry", "L1.1 entries"),
    lane_event!(5, 0x08, "l1_2_entry", "L1.2_Entry", "L1.2 entries"),
    lane_event!(
        5,
        0x09,
        "l1_short_duration",
        "L1_Short_Duration",
        "L1.0 entries that returned to L0 without L1.1/L1.2"
    ),
    lane_event!(
        5,
        0x0A,
        "l1_2_abort",
        "L1.2_Abort",
        "L1.2 entries aborted by CLKREQ#"
    ),
    lane_event!(5, 0x0B, "l2_entry", "L2_Entry", "L2 entries"),
    lane_event!(
        5,
        0x0C,
        "speed_change",
        "Speed_Change",
        "link speed changes"
    ),
    lane_event!(
        5,
        0x0D,
        "link_width_change",
        "Link_Width_Change",
        "link width changes"
    ),
    // Event group 6: 32-bit Layer-2 non-error counters (upstream 0x600-0x606).
    lane_event!(6, 0x00, "tx_ack_dllp", "Tx_Ack_DLLP", "Ack DLLPs sent"),
    lane_event!(
        6,
        0x01,
        "tx_update_fc_dllp",
        "Tx_Update_FC_DLLP",
        "UpdateFC DLLPs sent"
    ),
    lane_event!(6, 0x02, "rx_ack_dllp", "Rx_Ack_DLLP", "Ack DLLPs received"),
    lane_event!(
        6,
        0x03,
        "rx_update_fc_dllp",
        "Rx_Update_FC_DLLP",
        "UpdateFC DLLPs received"
    ),
    lane_event!(
        6,
        0x04,
        "rx_nullified_tlp",
        "Rx_Nullified_TLP",
        "nullified TLPs received"
    ),
    lane_event!(
        6,
        0x05,
        "tx_nullified_tlp",
        "Tx_Nullified_TLP",
        "nullified TLPs sent"
    ),
    lane_event!(
        6,
        0x06,
        "rx_duplicate_tlp",
        "Rx_Duplicate_TLP",
        "duplicate TLPs received"
    ),
    // Event group 7: 32-bit Layer-3 non-error counters (upstream 0x700-0x717).
    lane_event!(
        7,
        0x00,
        "tx_memory_write",
        "Tx_Memory_Write",
        "Memory Write TLPs sent"
    ),
    lane_event!(
        7,
        0x01,
        "tx_memory_read",
        "Tx_Memory_Read",
        "Memory Read TLPs sent"
    ),
    lane_event!(
        7,
        0x02,
        "tx_configuration_write",
        "Tx_Configuration_Write",
        "Configuration Write TLPs sent"
    ),
    lane_event!(
        7,
        0x03,
        "tx_configuration_read",
        "Tx_Configuration_Read",
        "Configuration Read TLPs sent"
    ),
    lane_event!(7, 0x04, "tx_io_write", "Tx_IO_Write", "I/O Write TLPs sent"),
    lane_event!(7, 0x05, "tx_io_read", "Tx_IO_Read", "I/O Read TLPs sent"),
    lane_event!(
        7,
        0x06,
        "tx_completion_without_data",
        "Tx_Completion_without_Data",
        "Cpl TLPs sent"
    ),
    lane_event!(
        7,
        0x07,
        "tx_completion_with_data",
        "Tx_Completion_w_Data",
        "CplD TLPs sent"
    ),
    lane_event!(
        7,
        0x08,
        "tx_message_tlp",
        "Tx_Message_TLP",
        "Message TLPs sent (PCIe VC)"
    ),
    lane_event!(7, 0x09, "tx_atomic", "Tx_Atomic", "AtomicOp TLPs sent"),
    lane_event!(
        7,
        0x0A,
        "tx_tlp_with_prefix",
        "Tx_TLP_with_Prefix",
        "TLPs with a prefix sent"
    ),
    lane_event!(
        7,
        0x0B,
        "rx_memory_write",
        "Rx_Memory_Write",
        "Memory Write TLPs received"
    ),
    lane_event!(
        7,
        0x0C,
        "rx_memory_read",
        "Rx_Memory_Read",
        "Memory Read TLPs received"
    ),
    lane_event!(
        7,
        0x0F,
        "rx_io_write",
        "Rx_IO_Write",
        "I/O Write TLPs received"
    ),
    lane_event!(
        7,
        0x10,
        "rx_io_read",
        "Rx_IO_Read",
        "I/O Read TLPs received"
    ),
    lane_event!(
        7,
        0x11,
        "rx_completion_without_data",
        "Rx_Completion_without_Data",
        "Cpl TLPs received"
    ),
    lane_event!(
        7,
        0x12,
        "rx_completion_with_data",
        "Rx_Completion_w_Data",
        "CplD TLPs received"
    ),
    lane_event!(
        7,
        0x13,
        "rx_message_tlp",
        "Rx_Message_TLP",
        "Message TLPs received (PCIe VC)"
    ),
    lane_event!(7, 0x14, "rx_atomic", "Rx_Atomic", "AtomicOp TLPs received"),
    lane_event!(
        7,
        0x15,
        "rx_tlp_with_prefix",
        "Rx_TLP_with_Prefix",
        "TLPs with a prefix received"
    ),
    lane_event!(
        7,
        0x16,
        "tx_ccix_tlp",
        "Tx_CCIX_TLP",
        "CCIX TLPs sent (CCIX VC)"
    ),
    lane_event!(
        7,
        0x17,
        "rx_ccix_tlp",
        "Rx_CCIX_TLP",
        "CCIX TLPs received (CCIX VC)"
    ),
];

/// An event on one of a family's general counters (HiSilicon, NVIDIA), named alike everywhere.
macro_rules! general_event {
    ($config:expr, $name:expr, $unit:expr, $desc:expr) => {
        EventDef {
            name: $name,
            seed_name: $name,
            config: $config,
            group: Group::General,
            unit: $unit,
            description: $desc,
        }
    };
}

/// HiSilicon PCIe PMU: events pair up on one counter (bit 16 selects the partner), so each
/// ratio (flux/time, latency/cnt) must be read from one group.
pub(crate) static HISI_EVENTS: &[EventDef] = &[
    general_event!(
        0x0010,
        "rx_mwr_latency",
        Unit::Raw,
        "inbound memory write latency sum"
    ),
    general_event!(
        0x10010,
        "rx_mwr_cnt",
        Unit::Events,
        "inbound memory writes (latency partner)"
    ),
    general_event!(
        0x0210,
        "rx_mrd_latency",
        Unit::Raw,
        "inbound memory read latency sum"
    ),
    general_event!(
        0x10210,
        "rx_mrd_cnt",
        Unit::Events,
        "inbound memory reads (latency partner)"
    ),
    general_event!(
        0x0011,
        "tx_mrd_latency",
        Unit::Raw,
        "outbound memory read latency sum"
    ),
    general_event!(
        0x10011,
        "tx_mrd_cnt",
        Unit::Events,
        "outbound memory reads (latency partner)"
    ),
    general_event!(
        0x0104,
        "rx_mwr_flux",
        Unit::Raw,
        "inbound memory write data"
    ),
    general_event!(
        0x10104,
        "rx_mwr_time",
        Unit::Raw,
        "time base for rx_mwr_flux"
    ),
    general_event!(0x0804, "rx_mrd_flux", Unit::Raw, "inbound memory read data"),
    general_event!(
        0x10804,
        "rx_mrd_time",
        Unit::Raw,
        "time base for rx_mrd_flux"
    ),
    general_event!(0x2004, "rx_cpl_flux", Unit::Raw, "inbound completion data"),
    general_event!(
        0x12004,
        "rx_cpl_time",
        Unit::Raw,
        "time base for rx_cpl_flux"
    ),
    general_event!(
        0x0105,
        "tx_mwr_flux",
        Unit::Raw,
        "outbound memory write data"
    ),
    general_event!(
        0x10105,
        "tx_mwr_time",
        Unit::Raw,
        "time base for tx_mwr_flux"
    ),
    general_event!(
        0x0405,
        "tx_mrd_flux",
        Unit::Raw,
        "outbound memory read data"
    ),
    general_event!(
        0x10405,
        "tx_mrd_time",
        Unit::Raw,
        "time base for tx_mrd_flux"
    ),
    general_event!(0x1005, "tx_cpl_flux", Unit::Raw, "outbound completion data"),
    general_event!(
        0x11005,
        "tx_cpl_time",
        Unit::Raw,
        "time base for tx_cpl_flux"
    ),
];

macro_rules! iio_event {
    ($umask:expr, $name:expr, $unit:expr, $desc:expr) => {
        EventDef {
            name: $name,
            seed_name: $name,
            config: 0xff | ($umask << 8),
            group: Group::FreeRunning,
            unit: $unit,
            description: $desc,
        }
    };
}

/// Intel IIO free-running counters (`event=0xff,umask=…`), Ice Lake and later scale: 32 bytes
/// per count.
pub(crate) static IIO_EVENTS: &[EventDef] = &[
    iio_event!(0x10, "ioclk", Unit::Cycles, "IIO clock ticks"),
    iio_event!(
        0x20,
        "bw_in_port0",
        Unit::Bytes(32),
        "inbound (device to memory) bytes, port 0"
    ),
    iio_event!(
        0x21,
        "bw_in_port1",
        Unit::Bytes(32),
        "inbound bytes, port 1"
    ),
    iio_event!(
        0x22,
        "bw_in_port2",
        Unit::Bytes(32),
        "inbound bytes, port 2"
    ),
    iio_event!(
        0x23,
        "bw_in_port3",
        Unit::Bytes(32),
        "inbound bytes, port 3"
    ),
    iio_event!(
        0x24,
        "bw_in_port4",
        Unit::Bytes(32),
        "inbound bytes, port 4"
    ),
    iio_event!(
        0x25,
        "bw_in_port5",
        Unit::Bytes(32),
        "inbound bytes, port 5"
    ),
    iio_event!(
        0x26,
        "bw_in_port6",
        Unit::Bytes(32),
        "inbound bytes, port 6"
    ),
    iio_event!(
        0x27,
        "bw_in_port7",
        Unit::Bytes(32),
        "inbound bytes, port 7"
    ),
];

/// Intel IIO free-running counters of Skylake-SP: four ports in, four out (umask 0x24-0x27
/// are `bw_out_port0-3` here, not inbound ports 4-7), 4 bytes per count, and utilisation.
pub(crate) static IIO_SKYLAKE_EVENTS: &[EventDef] = &[
    iio_event!(0x10, "ioclk", Unit::Cycles, "IIO clock ticks"),
    iio_event!(0x20, "bw_in_port0", Unit::Bytes(4), "inbound bytes, port 0"),
    iio_event!(0x21, "bw_in_port1", Unit::Bytes(4), "inbound bytes, port 1"),
    iio_event!(0x22, "bw_in_port2", Unit::Bytes(4), "inbound bytes, port 2"),
    iio_event!(0x23, "bw_in_port3", Unit::Bytes(4), "inbound bytes, port 3"),
    iio_event!(
        0x24,
        "bw_out_port0",
        Unit::Bytes(4),
        "outbound bytes, port 0"
    ),
    iio_event!(
        0x25,
        "bw_out_port1",
        Unit::Bytes(4),
        "outbound bytes, port 1"
    ),
    iio_event!(
        0x26,
        "bw_out_port2",
        Unit::Bytes(4),
        "outbound bytes, port 2"
    ),
    iio_event!(
        0x27,
        "bw_out_port3",
        Unit::Bytes(4),
        "outbound bytes, port 3"
    ),
    iio_event!(
        0x30,
        "util_in_port0",
        Unit::Cycles,
        "inbound busy cycles, port 0"
    ),
    iio_event!(
        0x31,
        "util_out_port0",
        Unit::Cycles,
        "outbound busy cycles, port 0"
    ),
    iio_event!(
        0x32,
        "util_in_port1",
        Unit::Cycles,
        "inbound busy cycles, port 1"
    ),
    iio_event!(
        0x33,
        "util_out_port1",
        Unit::Cycles,
        "outbound busy cycles, port 1"
    ),
    iio_event!(
        0x34,
        "util_in_port2",
        Unit::Cycles,
        "inbound busy cycles, port 2"
    ),
    iio_event!(
        0x35,
        "util_out_port2",
        Unit::Cycles,
        "outbound busy cycles, port 2"
    ),
    iio_event!(
        0x36,
        "util_in_port3",
        Unit::Cycles,
        "inbound busy cycles, port 3"
    ),
    iio_event!(
        0x37,
        "util_out_port3",
        Unit::Cycles,
        "outbound busy cycles, port 3"
    ),
];

/// NVIDIA Grace PCIe PMU (the driver's `mcf` table): each quantity for traffic to the local
/// socket's memory (`_loc`) and a remote socket's (`_rem`), and the CoreSight PMU's cycle
/// counter at event 1 << 32. Without `root_port=` no port is selected and nothing counts.
pub(crate) static NVIDIA_PCIE_EVENTS: &[EventDef] = &[
    general_event!(
        0x0,
        "rd_bytes_loc",
        Unit::Bytes(1),
        "bytes read, local memory"
    ),
    general_event!(
        0x1,
        "rd_bytes_rem",
        Unit::Bytes(1),
        "bytes read, remote memory"
    ),
    general_event!(
        0x2,
        "wr_bytes_loc",
        Unit::Bytes(1),
        "bytes written, local memory"
    ),
    general_event!(
        0x3,
        "wr_bytes_rem",
        Unit::Bytes(1),
        "bytes written, remote memory"
    ),
    general_event!(
        0x4,
        "total_bytes_loc",
        Unit::Bytes(1),
        "bytes read and written, local"
    ),
    general_event!(
        0x5,
        "total_bytes_rem",
        Unit::Bytes(1),
        "bytes read and written, remote"
    ),
    general_event!(
        0x6,
        "rd_req_loc",
        Unit::Events,
        "read requests, local memory"
    ),
    general_event!(
        0x7,
        "rd_req_rem",
        Unit::Events,
        "read requests, remote memory"
    ),
    general_event!(
        0x8,
        "wr_req_loc",
        Unit::Events,
        "write requests, local memory"
    ),
    general_event!(
        0x9,
        "wr_req_rem",
        Unit::Events,
        "write requests, remote memory"
    ),
    general_event!(0xa, "total_req_loc", Unit::Events, "requests, local memory"),
    general_event!(
        0xb,
        "total_req_rem",
        Unit::Events,
        "requests, remote memory"
    ),
    general_event!(
        0xc,
        "rd_cum_outs_loc",
        Unit::Raw,
        "outstanding reads summed per cycle, local"
    ),
    general_event!(
        0xd,
        "rd_cum_outs_rem",
        Unit::Raw,
        "outstanding reads summed per cycle, remote"
    ),
    general_event!(1 << 32, "cycles", Unit::Cycles, "PMU clock cycles"),
];
